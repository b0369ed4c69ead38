"""The static rules' per-file facts, kept in the user's cache folder by content (gate/facts.py):
through `claimbench check`, a kept file is not parsed again, an edit is always seen (its size and
modification time kept), and a cache entry of the wrong shape is read again, never trusted."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claimbench.gate import facts as F

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CLAIM = "claims/valid/softmax-cpu.yaml"
KERNEL = "kernels/softmax_cpu_kernel.py"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    for name in ("kernels", "claims"):
        shutil.copytree(FIXTURES / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(FIXTURES / "LIST.md", root / "LIST.md")
    return root


def _check(root: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    return subprocess.run([sys.executable, "-m", "claimbench", "--root", str(root), "check", str(root / CLAIM)],
                          capture_output=True, text=True, env=env, timeout=60)


def _store(cache: Path) -> tuple[Path, dict]:
    (path,) = (cache / "claimbench").glob("gate-facts-*.json")
    return path, json.loads(path.read_text())


def _sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def test_a_checked_file_is_kept_by_its_content_and_an_edit_is_seen_whatever_its_stat(project, tmp_path):
    cache = tmp_path / "cache"
    first = _check(project, cache)
    assert first.returncode == 0, first.stdout + first.stderr
    _, store = _store(cache)
    kernel = project / KERNEL
    assert _sha(kernel) in store and store[_sha(kernel)]["functions"]["online_softmax"]
    # the same size and modification time, another body: it calls the forbidden op
    st = kernel.stat()
    text = kernel.read_text()
    edited = text.replace("e = torch.exp(x - m)", "e = torch.softmax(x, -1)")
    phrase = "Nothing happens at import."
    edited = edited.replace(phrase, phrase[:len(phrase) - (len(edited) - len(text))])  # as long as before
    assert len(edited) == len(text) and edited != text
    kernel.write_text(edited)
    os.utime(kernel, ns=(st.st_atime_ns, st.st_mtime_ns))
    again = _check(project, cache)
    assert again.returncode == 1 and "torch.softmax" in again.stdout, again.stdout + again.stderr


def test_an_entry_of_the_wrong_shape_is_read_again(project, tmp_path):
    cache = tmp_path / "cache"
    kernel = project / KERNEL
    kernel.write_text(kernel.read_text().replace("e = torch.exp(x - m)", "e = torch.softmax(x, -1)"))
    assert _check(project, cache).returncode == 1
    path, store = _store(cache)
    for broken in ({"top_names": "online_softmax"}, {**store[_sha(kernel)], "functions": {"online_softmax": [[["name", "1", "x", None]], [], []]}},
                   {**store[_sha(kernel)], "module": [["fixed", 1, 2, None]]}, []):
        path.write_text(json.dumps({**store, _sha(kernel): broken}))
        out = _check(project, cache)
        assert out.returncode == 1 and "torch.softmax" in out.stdout, (broken, out.stdout + out.stderr)


def test_facts_round_trip_through_their_json_form(project):
    """What is kept is what was computed: each file of the fixture project, decoded from its JSON."""
    for p in sorted((project / "kernels").rglob("*.py")):
        computed = F._compute(p, p.read_text(encoding="utf-8"))
        F._remember("x", computed)
        kept = F._decode(json.loads(json.dumps(F._NEW.pop("x"))))
        assert kept == computed, p


def test_a_kept_file_is_not_parsed_again(project, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    assert _check(project, cache).returncode == 0
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    monkeypatch.setattr(F, "_BY_STAT", {})
    monkeypatch.setattr(F, "_STORE", None)  # as in a new process

    def no_parse(*a, **kw):
        raise AssertionError("parsed again")

    monkeypatch.setattr(F.ast, "parse", no_parse)
    got = F.facts(project / KERNEL)
    assert "online_softmax" in got.top_names and got.functions["online_softmax"][0]


def test_facts_computed_on_forked_workers_are_kept_by_the_parent(project, monkeypatch):
    """A large check forks its workers, which exit without running `atexit`: their facts come back."""
    from claimbench.gate import gateall
    from claimbench.spec.project import load_listing

    monkeypatch.setattr(F, "_BY_STAT", {})
    monkeypatch.setattr(F, "_STORE", {})
    monkeypatch.setattr(F, "_NEW", {})
    monkeypatch.setattr(F, "_save", lambda: None)  # this test's process writes no cache
    monkeypatch.setattr(gateall, "PARALLEL_FROM", 2)
    claims = [project / "claims" / "valid" / f"{c}.yaml" for c in ("softmax-cpu", "rowsum-cpu", "triton-scale")]
    results = gateall.gate_all(claims, project, load_listing(project))
    assert [r.ok for r in results] == [True, True, True], [r.problems for r in results]
    assert _sha(project / KERNEL) in F._NEW and _sha(project / "kernels" / "rowsum_kernel.py") in F._NEW


def test_a_fifo_or_a_link_planted_as_the_cache_is_not_read(project, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    planted = F._cache_file()
    planted.parent.mkdir(parents=True)
    os.mkfifo(planted)  # read as a file it blocks for ever
    out = _check(project, cache)
    assert out.returncode == 0, out.stdout + out.stderr
    planted.unlink()
    planted.symlink_to("/dev/zero")  # read as a file it never ends
    out = _check(project, cache)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_cache_keeps_the_recently_used_and_the_new_when_it_is_trimmed(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = F._cache_file()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"a": {"n": 1}, "b": {"n": 2}, "c": {"n": 3}}))
    monkeypatch.setattr(F, "MAX_ENTRIES", 2)
    monkeypatch.setattr(F, "_USED", {"a"})
    monkeypatch.setattr(F, "_NEW", {"d": {"n": 4}})
    F._save()
    assert list(json.loads(path.read_text())) == ["a", "d"]
