"""A `claimbench run` and the commands people run beside it lose nothing (issue 25).

Before, during one run: an ingested record was moved into the quarantine, LIST.md and README.md
went back to HEAD (an uncommitted README edit made before the run was lost too) and the run ended
`error` blaming its claim. Here a real run of a CPU claim goes on while `ingest` and `publish` are
started (each waits for the project lock, and says so); an uncommitted edit made before the run
stays. Afterwards every write is there, the run's own outcome is its claim's, and nothing was
quarantined.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import recordkit as rk

from claimbench.store.record import write_record

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SRC = str(Path(__file__).resolve().parents[1] / "src")


def _cli(root: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "claimbench", "--root", str(root), *args]


ENV = {**os.environ, "PYTHONPATH": SRC}


def _project(tmp_path: Path) -> Path:
    """The fixture project with a CPU claim of its own, committed, README.md included."""
    root = rk.copy_tree(tmp_path / "proj")
    for name in ("rowsum.py", "rowsum_kernel.py"):
        shutil.copy(FIXTURES / "kernels" / name, root / "kernels" / name)
    shutil.copy(FIXTURES / "claims" / "valid" / "rowsum-cpu.yaml", root / "claims" / "rowsum-cpu.yaml")
    (root / "README.md").write_text("the project\n")
    rk.commit_all(root, "a CPU claim beside the fixture's")
    return root


def _run_into_its_window(root: Path, *extra: str) -> tuple[subprocess.Popen, list[str]]:
    """`claimbench run` of the CPU claim, read until its claim's window is open (its trials began)."""
    run = subprocess.Popen(_cli(root, "run", "claims/rowsum-cpu.yaml", "--threads", "1", "--max-time-s", "1",
                                "--warmup-s", "0.1", *extra), cwd=root, env=ENV, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    assert run.stdout is not None
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        line = run.stdout.readline()
        lines.append(line)
        if "correctness" in line or not line:
            break
    assert any("correctness" in x for x in lines), "".join(lines)
    return run, lines


def test_a_run_with_ingest_publish_and_edits_beside_it_loses_none_of_them(tmp_path):
    root = _project(tmp_path)
    (root / "README.md").write_text("the project, with an uncommitted edit made before the run\n")
    made = write_record(tmp_path / "artifact", rk.build(root, "softmax-online", created="2026-11-20T09:00:00.000000Z",
                                                        kernel_us=150, baseline_us=243, seed=40))

    run, lines = _run_into_its_window(root)
    ingest = subprocess.run(_cli(root, "ingest", str(made.parent.parent)), cwd=root, env=ENV, capture_output=True,
                            text=True, timeout=300)
    publish = subprocess.run(_cli(root, "publish"), cwd=root, env=ENV, capture_output=True, text=True, timeout=300)
    out, _ = run.communicate(timeout=300)
    said = "".join(lines) + out
    assert ingest.returncode == 0, ingest.stdout + ingest.stderr
    assert publish.returncode in (0, 1) and "Traceback" not in publish.stderr, publish.stdout + publish.stderr
    assert "waiting for the claim being measured" in ingest.stdout + ingest.stderr, ingest.stdout + ingest.stderr
    stored = root / "results" / "records" / "softmax-online" / made.name
    assert stored.read_bytes() == made.read_bytes()  # ingested during the run, still there
    assert "results/records/softmax-online/" + made.name in (root / "LIST.md").read_text()  # published, kept
    assert "uncommitted edit made before the run" in (root / "README.md").read_text()
    assert "changed files they must not touch" not in said, said
    assert not (root / "results" / ".quarantine").exists()
    assert run.returncode in (0, 1), said  # the claim's own verdict (a busy machine may leave it inconclusive)


def test_an_edit_saved_during_a_confined_run_stays_and_is_not_blamed_on_the_claim(tmp_path):
    """Under a sandbox that makes the project read-only to the claim's processes (Landlock here,
    bwrap where it works), what changes in the project during the run is somebody else's: the run
    leaves it and says so. Before, the run put README.md back and quarantined the edit (seen
    2026-12-04: three helpers editing claims while one `claimbench run` went on)."""
    from claimbench.machine import landlock

    if landlock.abi() < 1 and not shutil.which("bwrap"):
        import pytest
        pytest.skip("neither Landlock nor bubblewrap here: the run cannot tell the claim's writes from yours")
    root = _project(tmp_path)
    run, lines = _run_into_its_window(root, "--repeat", "1")
    (root / "README.md").write_text("the project, edited in an editor while the claim ran\n")
    (root / "notes.txt").write_text("a new file saved meanwhile\n")
    out, _ = run.communicate(timeout=300)
    said = "".join(lines) + out
    assert "sandbox: Landlock" in said or shutil.which("bwrap"), said
    assert (root / "README.md").read_text() == "the project, edited in an editor while the claim ran\n"
    assert (root / "notes.txt").is_file()
    assert "changed during the run by another process, left as they are" in said, said
    assert "changed files they must not touch" not in said, said
    assert not (root / "results" / ".quarantine").exists()
    assert run.returncode in (0, 1), said


def test_an_edit_saved_during_a_confined_run_of_two_ranks_stays(tmp_path):
    """The same for a claim of two ranks, whose sides are confined as one process's are: the run held
    it to the unconfined rule, put back every file of the project changed while it ran and
    quarantined the edit (seen 2026-12-06: the shipped NCCL and tensor-parallel claims, checked as
    test items in a checkout, put back source files edited meanwhile)."""
    from claimbench.machine import landlock
    from claimbench.machine.detect import detect
    from claimbench.options import RunOptions
    from claimbench.runner import run_one

    if landlock.abi() < 1 and not shutil.which("bwrap"):
        import pytest
        pytest.skip("neither Landlock nor bubblewrap here: the run cannot tell the claim's writes from yours")
    root = tmp_path / "dist"
    shutil.copytree(Path(__file__).parent / "fixtures" / "distributed", root)
    (root / "notes.md").write_text("before the run\n")
    edited: list[str] = []

    def progress(msg: str) -> None:
        if "starting its processes" in msg and not edited:  # after the run's census of the project
            (root / "notes.md").write_text("edited while the claim ran\n")
            (root / "new.txt").write_text("saved meanwhile\n")
            edited.append(msg)

    out = run_one(root / "claims" / "allreduce-gloo.yaml", root, detect(root, with_gpu=False),
                  opts=RunOptions(results=tmp_path / "results", correctness_only=True, threads=1, progress=progress))
    assert edited, out.reason
    assert (root / "notes.md").read_text() == "edited while the claim ran\n", out.reason
    assert (root / "new.txt").is_file(), out.reason
    assert "must not touch" not in out.reason and not (tmp_path / "results" / ".quarantine").exists(), out.reason
