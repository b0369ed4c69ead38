"""Faults lose nothing and crash nothing: a read-only results folder, a full disk, a killed
publish, a record file that is huge or not a file at all. Each gives one line, never a traceback."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.report import publish as pub
from claimbench.report.audit import audit
from claimbench.store.record import MAX_RECORD_BYTES

NOW = "2026-12-01T12:00:00.000000Z"
SRC = str(Path(__file__).resolve().parents[1] / "src")


@pytest.fixture
def tree(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    pub.publish(root, root / "LIST.md", root / "results", now=NOW)
    return root, recs


def _as_reader(args: list[str], cwd: Path, trusted: bool = True) -> subprocess.CompletedProcess:
    """Run the CLI as a user who may read the tree but write nothing in it: an unprivileged user
    when this runs as root (root writes anywhere), else ourselves on a tree made read-only."""
    env = {**os.environ, "PYTHONPATH": SRC, "HOME": "/tmp",  # a reader who trusts this clone says so to git
           **({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": str(cwd)}
              if trusted else {})}
    cmd = [sys.executable, "-m", "claimbench", "--root", str(cwd), *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot make a read-only folder")
        cmd = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *cmd]
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def readonly_tree():
    base = Path(tempfile.mkdtemp(prefix="claimbench-ro-"))
    try:
        root, recs = rk.standard_tree(base / "proj")
        stale = root / "results" / "index.jsonl"
        stale.write_text(stale.read_text()[: len(stale.read_text()) // 2])  # the index must be repaired
        shutil.rmtree(root / "results" / ".cache", ignore_errors=True)
        for p in [base, *base.rglob("*")]:
            mode = p.stat().st_mode
            p.chmod((mode | stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH | (0o555 if p.is_dir() else 0))
                    & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        yield root, recs
    finally:
        for p in [base, *base.rglob("*")]:
            p.chmod(p.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("args, code, phrase", [
    (["publish", "--dry-run"], 1, "list would change"),
    (["audit"], 1, "audit: 5 problems"),
    (["table"], 0, "| claim | hardware |"),
    (["show", "softmax-online"], 0, "provenance of softmax-online"),
])
def test_read_only_results_work_for_readers(readonly_tree, args, code, phrase):
    root, recs = readonly_tree
    if args[0] == "show":
        args = args + ["--results", str(root / "results")]
    r = _as_reader(args, root)
    assert "Traceback" not in r.stderr, r.stderr
    assert r.returncode == code, r.stdout + r.stderr
    assert phrase in r.stdout
    assert not (root / "results" / ".cache").exists()


def test_a_clone_git_will_not_read_fails_closed_with_how_to_trust_it(readonly_tree):
    """Another user's clone: git refuses it (safe.directory), so no record's commit can be checked,
    and audit says why and how to trust it instead of passing or crashing."""
    root, _ = readonly_tree
    if os.geteuid() != 0:
        pytest.skip("needs another user: git reads a clone its own user owns")
    r = _as_reader(["audit"], root, trusted=False)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "which another user owns" in r.stdout and "safe.directory" in r.stdout, r.stdout


def test_show_record_in_a_read_only_tree(readonly_tree):
    root, recs = readonly_tree
    r = _as_reader(["show", "--record", str(recs["softmax_h200"])], root)
    assert r.returncode == 0 and "verdict    verified" in r.stdout and not r.stderr


def test_disk_full_while_publishing_is_one_line_and_the_list_is_untouched(tree, monkeypatch, capsys):
    root, _ = tree
    stub = root / "kernels" / "stubs.py"
    stub.write_text(stub.read_text() + "\n# changed\n")  # every number comes off: the list must change
    before = (root / "LIST.md").read_bytes()
    real = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    assert main(["--root", str(root), "publish"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err == [f"claimbench: {root / 'LIST.md'}: cannot write the list (No space left on device); it was left unchanged"]
    monkeypatch.setattr(os, "fsync", real)
    assert (root / "LIST.md").read_bytes() == before
    assert not [p for p in root.iterdir() if p.name.startswith(".LIST.md.")]


def test_caches_that_cannot_be_written_are_skipped(tree, monkeypatch):
    root, _ = tree
    shutil.rmtree(root / "results" / ".cache", ignore_errors=True)
    import tempfile as tf

    real = tf.mkstemp

    def no_space(*a, dir=None, **kw):
        if dir is not None and Path(dir).resolve().is_relative_to((root / "results").resolve()):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(*a, dir=dir, **kw)

    monkeypatch.setattr(tf, "mkstemp", no_space)
    (root / "results" / "index.jsonl").unlink()
    p = pub.publish(root, root / "LIST.md", root / "results", now=NOW)
    assert not p.failed and len(p.numbers) == 6
    assert audit(root, root / "LIST.md", root / "results", now=NOW) == []
    assert not (root / "results" / "index.jsonl").exists()


def test_temp_files_of_a_killed_publish_are_cleaned_at_the_next_run(tree):
    root, _ = tree
    dead = root / ".LIST.md.99999999.k1ll3d.tmp"  # no such process
    old = root / ".LIST.md.q8z2.tmp"  # the name an older publish used, an hour old
    alive = root / f".LIST.md.{os.getpid()}.w0rk.tmp"  # a publish running right now
    other = root / ".README.md.99999999.x.tmp"
    for f in (dead, old, alive, other):
        f.write_text("half a list")
    os.utime(old, (1, 1))
    pub.publish(root, root / "LIST.md", root / "results", now=NOW)
    assert not dead.exists() and not old.exists() and alive.exists() and other.exists()


def test_a_huge_sparse_record_is_refused_before_it_is_read(tree):
    root, recs = tree
    path = recs["transpose_old"]
    with open(path, "r+b") as f:
        f.truncate(2 << 30)  # 2 GiB, sparse: once read whole (and parsed) before being called unreadable
    problems = audit(root, root / "LIST.md", root / "results", cache=False, now=NOW)
    mine = [p for p in problems if p.path.endswith(path.name)]
    assert [(p.key, p.message.split(": ", 1)[1]) for p in mine] == [
        ("record", f"{2 << 30} bytes, over the {MAX_RECORD_BYTES >> 20} MiB limit for a record; refused unread")]
    p = pub.plan(root, root / "LIST.md", root / "results", now=NOW)
    assert any(r[0].endswith(path.name) for r in p.refused)


def test_show_record_reads_only_regular_files(tmp_path, capsys):
    assert main(["show", "--record", "/dev/zero"]) == 1
    assert capsys.readouterr().err == ("claimbench: /dev/zero: not a regular file (a FIFO, device or folder); "
                                       "a record must be one\n")
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert main(["show", "--record", str(fifo)]) == 1  # would block forever on open() without O_NONBLOCK
    assert "not a regular file" in capsys.readouterr().err
