"""The audit cache finds an unchanged record by its stat without reading it, and never a changed one.

The stat is trusted only for a file that was still for two seconds before it was read; these
tests pretend the read happened later (the clock the workers read) instead of sleeping.
"""

from __future__ import annotations

import json
import os
import time

import pytest
import recordkit as rk

from claimbench.report.audit import audit
from claimbench.report.publish import publish
from claimbench.store import auditcache, recordcheck
from claimbench.store.record import load_record


@pytest.fixture
def tree(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    publish(root, root / "LIST.md", root / "results")
    return root, recs


@pytest.fixture
def reads(monkeypatch):
    """How many record files the audit's checking code read."""
    count = {"n": 0}
    real = recordcheck.read_record_bytes

    def counted(*a, **k):
        count["n"] += 1
        return real(*a, **k)

    monkeypatch.setattr(recordcheck, "read_record_bytes", counted)
    return count


def later(monkeypatch, seconds: float) -> None:
    """The workers' clock, ``seconds`` ahead: every file now looks still for that long."""
    now = time.time_ns
    monkeypatch.setattr(recordcheck.time, "time_ns", lambda: now() + int(seconds * 1e9))


def run(root):
    return audit(root, root / "LIST.md", root / "results")


def test_a_file_still_since_it_was_read_is_not_read_again(tree, reads, monkeypatch):
    root, recs = tree
    later(monkeypatch, 10)
    assert run(root) == []
    first = reads["n"]
    assert first == len(recs) >= 3
    assert run(root) == []
    assert reads["n"] == first  # the warm audit read no record


def test_a_fresh_file_is_read_and_hashed_every_time(tree, reads):
    """Written within the last two seconds: its stat could miss a write in the same clock tick."""
    root, recs = tree
    assert run(root) == [] and run(root) == []
    assert reads["n"] == 2 * len(recs)


def test_an_edit_that_keeps_size_and_mtime_is_still_caught(tree, reads, monkeypatch):
    """`touch -r` puts the mtime back; the ctime moves all the same, so the file is read again."""
    root, recs = tree
    later(monkeypatch, 10)
    assert run(root) == []
    path = recs["transpose_new"]
    st = os.stat(path)
    text = path.read_text()
    rec = load_record(path)
    time.sleep(0.05)  # past the file system's clock tick, as any real later edit is
    forged = text.replace('"verdict": "refuted"', '"verdict": "verified"', 1)
    assert forged != text and len(forged) != len(text)
    pad = len(text) - len(forged)  # keep the size too: trailing spaces are still JSON
    path.write_text(forged.rstrip("\n") + " " * pad + "\n" if pad > 0 else forged)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns and rec.verdict == "refuted"
    before = reads["n"]
    problems = run(root)
    assert reads["n"] == before + 1
    assert any(p.key == "verdict" and "says verified" in p.message for p in problems)


def test_a_line_is_found_by_sha256_after_a_move_and_takes_the_new_stat(tree, monkeypatch):
    root, recs = tree
    later(monkeypatch, 10)
    assert run(root) == []
    (cfile,) = (root / "results" / ".cache").glob("audit-*.jsonl")
    rows = [json.loads(line) for line in cfile.read_text().splitlines()]
    assert all(r[2] is not None for r in rows)  # every stat kept: the files looked still
    src = recs["transpose_new"]
    copy = src.with_name(src.name)  # same name, new inode: a checkout rewrites files this way
    data = src.read_bytes()
    src.unlink()
    copy.write_bytes(data)
    time.sleep(0.05)
    assert run(root) == []
    cache = auditcache.load(cfile)
    rel = src.relative_to(root / "results").as_posix()
    assert cache.by_path[rel].stat == auditcache.stat_key(os.stat(copy))


def test_a_damaged_stat_falls_back_to_the_sha256(tree, monkeypatch, reads):
    root, recs = tree
    later(monkeypatch, 10)
    assert run(root) == []
    (cfile,) = (root / "results" / ".cache").glob("audit-*.jsonl")
    rows = [json.loads(line) for line in cfile.read_text().splitlines()]
    for r in rows:
        r[2] = ["not", "a", "stat", 0]
    cfile.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = reads["n"]
    assert run(root) == []
    assert reads["n"] == before + len(recs)


def test_a_torn_line_costs_only_its_record_and_the_others_are_still_found(tree, reads, monkeypatch):
    """The cache is parsed a line at a time (twice as fast as one parse of all its lines): a line cut
    by a killed write, or a blank one, drops that entry alone."""
    root, recs = tree
    later(monkeypatch, 10)
    assert run(root) == []
    cfile = next((root / "results" / ".cache").glob("audit-*.jsonl"))
    lines = cfile.read_bytes().splitlines(keepends=True)
    cfile.write_bytes(lines[0][: len(lines[0]) // 2] + b"\n\n" + b"".join(lines[1:]))
    cache = auditcache.load(cfile)
    assert len(cache.by_sha) == len(lines) - 1 and all(e.line.endswith(b"\n") for e in cache.by_sha.values())
    before = reads["n"]
    assert run(root) == []
    assert reads["n"] == before + 1  # only the record whose line was torn is read again
