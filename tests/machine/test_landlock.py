"""machine/landlock.py: what a confined side may and may not do, in a real subprocess (the
restriction cannot be lifted, so never in the test process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from claimbench.machine import landlock

SRC = str(Path(__file__).resolve().parents[2] / "src")
pytestmark = pytest.mark.skipif(landlock.abi() < 1, reason="this kernel has no Landlock (Linux 5.13 or later)")

CHILD = r"""
import json, os, sys
sys.path.insert(0, SRC)
from claimbench.machine import landlock
scratch, project = sys.argv[1], sys.argv[2]
out = {"abi": landlock.confine([scratch, "/dev", f"/proc/{os.getpid()}"], protected=project)}
def attempt(name, fn):
    try:
        fn()
        out[name] = "allowed"
    except OSError as e:
        out[name] = e.strerror
attempt("scratch", lambda: open(os.path.join(scratch, "f"), "w").write("x"))
attempt("project", lambda: open(os.path.join(project, "README.md"), "a").write("x"))
attempt("project_new", lambda: open(os.path.join(project, "planted"), "w").write("x"))
attempt("rename_out", lambda: os.rename(os.path.join(scratch, "f"), os.path.join(project, "moved")))
attempt("dev_null", lambda: open("/dev/null", "w").write("x"))
attempt("signal_parent", lambda: os.kill(os.getppid(), 0))
print(json.dumps(out))
""".replace("SRC", repr(SRC))


def test_a_confined_process_writes_only_its_scratch_and_signals_only_its_own(tmp_path):
    scratch, project = tmp_path / "scratch", tmp_path / "project"
    scratch.mkdir()
    project.mkdir()
    (project / "README.md").write_text("mine\n")
    p = subprocess.run([sys.executable, "-c", CHILD, str(scratch), str(project)], capture_output=True, text=True,
                       timeout=60)
    got = json.loads(p.stdout.strip().splitlines()[-1])
    assert got["abi"] >= 1 and got["scratch"] == "allowed" and got["dev_null"] == "allowed", got
    assert got["project"] == got["project_new"] == "Permission denied", got
    assert got["rename_out"] != "allowed", got
    assert (project / "README.md").read_text() == "mine\n" and not (project / "planted").exists()
    if got["abi"] >= 6:
        assert got["signal_parent"] == "Operation not permitted", got


def test_confining_fails_closed_when_the_project_stays_writable(tmp_path):
    """A project beneath a writable folder would stay writable: the write probe must refuse it."""
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from claimbench.machine import landlock\n"
            "try:\n    landlock.confine([sys.argv[1]], protected=sys.argv[2])\nexcept landlock.ConfineError as e:\n"
            "    print('refused:', e)\n") % SRC
    (tmp_path / "project").mkdir()
    p = subprocess.run([sys.executable, "-c", code, str(tmp_path), str(tmp_path / "project")], capture_output=True,
                       text=True, timeout=60)
    assert "refused: Landlock was applied but a write under" in p.stdout, p.stdout + p.stderr
    assert not list((tmp_path / "project").iterdir())  # the probe cleaned up after itself


def test_the_sandbox_choice_falls_back_to_landlock_and_says_why():
    from claimbench.orchestrator.sandbox import bwrap_works, choose

    box = choose("auto", cuda=False)
    assert box.kind == ("bwrap" if bwrap_works()[0] else "landlock") and box.confines_writes
    assert choose("landlock", cuda=False).kind == "landlock"
    assert not choose("none", cuda=False).confines_writes
