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


_READER: list = []
_AS_NOBODY = ["--reuid=65534", "--regid=65534", "--clear-groups"]


def _runs_as_nobody(python: str, path: str) -> str:
    """'' when the unprivileged user can import claimbench (and what the CLI needs) this way, else why not."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return "running as root without setpriv: cannot make a read-only folder"
    r = subprocess.run([setpriv, *_AS_NOBODY, python, "-c", "import claimbench.cli, pydantic, yaml, pandas"],
                       env={**os.environ, "PYTHONPATH": path, "HOME": "/tmp"}, capture_output=True, text=True,
                       timeout=120)
    return "" if r.returncode == 0 else (r.stderr.strip().splitlines() or ["no output"])[-1][:200]


def _reader_python() -> tuple[str, str]:
    """(interpreter, PYTHONPATH) the unprivileged user can run claimbench with. A checkout under a
    folder only its owner may enter (`mktemp -d`, a private home: issue 26) is out of that user's
    reach, so the package and the environment's packages are linked (`cp -al`: hard links, no data
    copied) into a world-readable folder once per session; where even that does not import, the
    test skips with the reason."""
    if _READER:
        return _READER[0]
    import atexit
    import sysconfig

    if not _runs_as_nobody(sys.executable, SRC):
        _READER.append((sys.executable, SRC))
        return _READER[0]
    copy = Path(tempfile.mkdtemp(prefix="claimbench-reader-"))
    atexit.register(shutil.rmtree, copy, True)
    copy.chmod(0o755)
    site = sysconfig.get_paths()["purelib"]
    for src, dst in ((Path(SRC) / "claimbench", copy / "src" / "claimbench"), (Path(site), copy / "site")):
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.parent.chmod(0o755)
        r = subprocess.run(["cp", "-al", str(src), str(dst)], capture_output=True, text=True)
        if r.returncode != 0:
            pytest.skip(f"the checkout is in a folder other users cannot enter, and no readable copy of "
                        f"{src} could be linked: {r.stderr.strip()[:200]}")
    path = f"{copy / 'src'}{os.pathsep}{copy / 'site'}"
    python = os.path.realpath(sys.executable)
    why = _runs_as_nobody(python, path)
    if why:
        pytest.skip(f"the checkout is in a folder other users cannot enter, and its linked copy does not "
                    f"import as uid 65534 either: {why}")
    _READER.append((python, path))
    return _READER[0]


def _as_reader(args: list[str], cwd: Path, trusted: bool = True) -> subprocess.CompletedProcess:
    """Run the CLI as a user who may read the tree but write nothing in it: an unprivileged user
    when this runs as root (root writes anywhere), else ourselves on a tree made read-only."""
    python, path = _reader_python() if os.geteuid() == 0 else (sys.executable, SRC)
    env = {**os.environ, "PYTHONPATH": path, "HOME": "/tmp",  # a reader who trusts this clone says so to git
           **({"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "safe.directory", "GIT_CONFIG_VALUE_0": str(cwd)}
              if trusted else {})}
    cmd = [python, "-m", "claimbench", "--root", str(cwd), *args]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot make a read-only folder")
        cmd = [setpriv, *_AS_NOBODY, *cmd]
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
    """Only the names publish's own mkstemp makes (`.LIST.md.<pid>.<8 random>.tmp`), and only when
    that pid is gone: an old-looking `.LIST.md.<word>.tmp` may be a person's file, and is left."""
    import subprocess
    import sys

    root, _ = tree
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # reaped: its pid runs nothing
    dead = root / f".LIST.md.{gone.pid}.k1ll3d_0.tmp"
    old = root / ".LIST.md.q8z2.tmp"  # not a name this publish makes, an hour old: not its file
    alive = root / f".LIST.md.{os.getpid()}.w0rk1ng_.tmp"  # a publish running right now
    other = root / f".README.md.{gone.pid}.x0000000.tmp"
    for f in (dead, old, alive, other):
        f.write_text("half a list")
    os.utime(old, (1, 1))
    p = pub.publish(root, root / "LIST.md", root / "results", now=NOW)
    assert not dead.exists() and old.exists() and alive.exists() and other.exists()
    assert p.swept == (str(dead),)


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
