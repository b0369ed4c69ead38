"""orchestrator/servers.py: the API's fork servers serve every project of the process outside bwrap.

A fork server runs no claim code; what ties a side to its project is what the Spawn tells it (its
working folder, its Landlock scratch and the project it must not write). Before, `run_one` without a
run started a server per project: a torch import each (29 in one test run, 11 after).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from claimbench.machine import backends, landlock
from claimbench.machine.detect import detect
from claimbench.options import RunOptions
from claimbench.orchestrator import servers as pool
from claimbench.orchestrator.processes import ForkServer
from claimbench.orchestrator.sandbox import bwrap_works, choose
from claimbench.orchestrator.servers import server_env
from claimbench.runner import run_one
from claimbench.stats.status import Status

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
needs_landlock = pytest.mark.skipif(landlock.abi() < 1, reason="this kernel has no Landlock")


def _project(root: Path) -> Path:
    shutil.copytree(FIXTURES / "kernels", root / "kernels")
    shutil.copytree(FIXTURES / "claims", root / "claims")
    shutil.copy(FIXTURES / "LIST.md", root / "LIST.md")
    return root


def _writes_record(project: Path) -> Path:
    """softmax-cpu with the kernel that writes results/records/forged/forged.json (relative to its cwd)."""
    text = (project / "claims/valid/softmax-cpu.yaml").read_text().replace("id: softmax-cpu", "id: writes-record")
    path = project / "claims/writes-record.yaml"
    path.write_text(text.replace("kernels/softmax_cpu_kernel.py:online_softmax", "kernels/cheat/writes_record.py:kernel"))
    return path


@needs_landlock
def test_a_side_of_another_project_works_in_it_and_writes_only_its_scratch(tmp_path):
    a, b = _project(tmp_path / "a"), _project(tmp_path / "b")
    cpu_env = backends.child_env([], "cpu")
    server = ForkServer(a, server_env(1, cpu_env), sandbox=choose("landlock", cuda=False), log_path=tmp_path / "server.log")
    sides = []
    try:
        with open(tmp_path / "side.log", "wb") as log:
            sides.append(mine := server.spawn("task", cpu_env, log_fd=log.fileno(), max_memory_bytes=None))
            sides.append(theirs := server.spawn("task", cpu_env, log_fd=log.fileno(), max_memory_bytes=None, root=b))
            sides.append(server.spawn("kernel", cpu_env, log_fd=log.fileno(), max_memory_bytes=None))
        assert os.readlink(f"/proc/{mine.pid}/cwd") == str(a.resolve())
        assert os.readlink(f"/proc/{theirs.pid}/cwd") == str(b.resolve())
        scratches = dict(server.scratches)
        assert sorted(scratches) == sorted([(str(a.resolve()), "task"), (str(b.resolve()), "task"),
                                            (str(a.resolve()), "kernel")])
        assert len(set(scratches.values())) == 3 and all(Path(s).is_dir() for s in scratches.values())
    finally:
        for side in sides:
            side.channel.close()
        server.close()
    assert not any(Path(s).exists() for s in scratches.values())  # each project's scratch goes with the server


def _opts(p: Path, sandbox: str) -> RunOptions:
    return RunOptions(results=p / "results", threads=1, sandbox=sandbox, correctness_only=True)


@needs_landlock
def test_run_one_serves_two_projects_from_one_server_and_confines_each_to_its_own(tmp_path):
    a, b = _project(tmp_path / "a"), _project(tmp_path / "b")
    out = run_one(a / "claims/valid/rowsum-cpu.yaml", a, detect(a), opts=_opts(a, "landlock"))
    assert out.status == Status.SKIPPED and out.checked, out.reason
    assert '"sandbox": "landlock"' in Path(out.record_path).read_text(), out.record_path
    before = {k: v for k, v in pool._POOL.items() if k[0] == "landlock"}
    assert before and all(s.alive() for s in before.values())  # a's server came from the pool and still runs
    out = run_one(b / "claims/valid/rowsum-cpu.yaml", b, detect(b), opts=_opts(b, "landlock"))
    assert out.status == Status.SKIPPED and out.checked, out.reason
    assert {k: v for k, v in pool._POOL.items() if k[0] == "landlock"} == before  # no server started for b
    assert out.record_path is not None and Path(out.record_path).is_relative_to(b / "results")
    out = run_one(_writes_record(b), b, detect(b), opts=_opts(b, "landlock"))  # a write into b is refused in b's own side
    assert out.status == Status.ERROR and "Permission denied" in out.reason, out.reason
    assert "changed files" not in out.reason, out.reason
    assert not (b / "results/records/forged").exists() and not (a / "results/records/forged").exists()
    assert {k: v for k, v in pool._POOL.items() if k[0] == "landlock"} == before


_LEAVES = """
import os
def vectorized(x):
    open(os.path.join(os.environ["TMPDIR"], "left-by-a.txt"), "w").write("a's secret")
    open("/dev/shm/left-by-a", "w").write("a")
    return x.sum(dim=-1)
"""
_LOOKS = """
import glob, os
def vectorized(x):
    seen = glob.glob("/tmp/claimbench-*/left-by-a.txt") + glob.glob("/dev/shm/left-by-a")
    seen += [p for p in (os.path.join(os.getcwd(), "..", "a", "kernels", "rowsum_kernel.py"),) if os.path.exists(p)]
    raise RuntimeError(f"b's kernel sees {sorted(seen)} of a")
"""


@pytest.mark.skipif(not bwrap_works()[0], reason="bubblewrap cannot run here")
def test_a_bwrap_server_is_its_projects_alone(tmp_path):
    """A bwrap server binds its project when it starts, and its private /tmp and /dev/shm outlive each
    claim: shared by two projects under one /tmp folder (tried, 2026-12-06), b's kernel read a's
    sources and the files a's kernel left in the sandbox (an adversarial review). Each project gets
    its own server, so b's kernel sees nothing of a."""
    a, b = _project(tmp_path / "a"), _project(tmp_path / "b")
    (a / "kernels/rowsum_kernel.py").write_text(_LEAVES)
    (b / "kernels/rowsum_kernel.py").write_text(_LOOKS)
    out = run_one(a / "claims/valid/rowsum-cpu.yaml", a, detect(a), opts=_opts(a, "bwrap"))
    assert out.status == Status.SKIPPED and out.checked, out.reason
    assert '"sandbox": "bwrap"' in Path(out.record_path).read_text(), out.record_path
    out = run_one(b / "claims/valid/rowsum-cpu.yaml", b, detect(b), opts=_opts(b, "bwrap"))
    assert "b's kernel sees [] of a" in out.reason, out.reason


def test_thread_binding_settings_are_kept_from_the_sides_and_a_threaded_claim_still_runs(tmp_path, monkeypatch, capsys):
    """With OMP_PROC_BIND=true in the shell, libgomp bound each thread it started and the side's
    seccomp filter (machine/pinning.py) refused it: every claim run on two threads or more ended in
    error ("libgomp: Thread creation failed: Operation not permitted"). The orchestrator pins the
    sides; the binding settings stay out of the fork server's environment, and `run` says so."""
    from claimbench.cli import main
    from claimbench.orchestrator.servers import THREAD_BINDING_ENV, dropped_binding

    project = _project(tmp_path / "p")
    monkeypatch.setenv("OMP_PROC_BIND", "true")
    monkeypatch.setenv("OMP_PLACES", "cores")
    assert not set(THREAD_BINDING_ENV) & set(server_env(2, {}))
    assert dropped_binding() == ["OMP_PROC_BIND=true", "OMP_PLACES=cores"]
    code = main(["--root", str(project), "run", str(project / "claims/valid/softmax-cpu.yaml"), "--threads", "2",
                 "--timing", "off", "--results", str(project / "results"), "--quiet", "--format", "json"])
    out = capsys.readouterr()
    import json
    (row,) = json.loads(out.out)
    assert code == 0 and row["status"] == "skipped" and "checks passed" in row["reason"], row
    assert "OMP_PROC_BIND=true, OMP_PLACES=cores: not passed to the claims' processes" in out.err, out.err
