"""The runner end to end on CPU: a verified record, the CPU correctness fallback, repeats, isolation."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import honest_timing

from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.runner import run_one
from claimbench.stats.status import Status
from claimbench.stats.verdict import decide
from claimbench.store.record import load_record

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("proj")
    shutil.copytree(FIXTURES / "kernels", root / "kernels")
    shutil.copytree(FIXTURES / "claims", root / "claims")
    shutil.copy(FIXTURES / "LIST.md", root / "LIST.md")
    return root


@pytest.fixture(scope="module")
def hw(project):
    return detect(project)


def opts(project, **kw):
    # one thread: OpenMP threads on a loaded 2-core machine turn a 10 us sum into 10 ms
    return RunOptions(results=project / "results", timing=TimingLimits(max_time_s=0.5, warmup_s=0.1), threads=1, **kw)


def test_cpu_claim_runs_to_a_verified_record_that_audit_can_recompute(project, hw):
    out = run_one(project / "claims/valid/rowsum-cpu.yaml", project, hw, opts=opts(project))
    assert honest_timing(out), out.reason
    rec = load_record(out.record_path)
    assert rec.published_value == (rec.value if out.status == Status.VERIFIED else None) and rec.value > 3.0 * 0.9
    assert rec.kernel.samples_us and rec.baseline.samples_us and rec.protocol["stop_reason"]
    assert rec.correctness["passed"] is True and len(rec.seeds) >= 4
    # where its time went, per phase, over its processes (issue 23: budgets from measured costs)
    assert rec.protocol["startup_s"] > 0 and rec.protocol["verification_s"] > 0 and rec.protocol["timing_s"] > 0
    assert "kernels/rowsum.py" in rec.source_sha256 and rec.ceilings.get("bandwidth_gbps")
    v = decide(rec.evidence())
    assert (v.status.value, v.value, v.ci_low) == (rec.verdict, rec.value, rec.ci_low)
    assert out.record_path.parent == project / "results/records/rowsum-cpu"


def test_repeat_combines_processes_into_one_ci(project, hw):
    said: list[str] = []
    out = run_one(project / "claims/valid/rowsum-cpu.yaml", project, hw, opts=opts(project, repeat=2, progress=said.append))
    rec = load_record(out.record_path)
    assert set(rec.kernel.processes) == {0, 1} and rec.protocol["repeat"] == 2
    # each process's lines say which process they come from (issue 26: "trial 1/3" three times)
    trials = [line for line in said if "correctness: trial 1/" in line]
    assert [t.split(": ")[1] for t in trials] == ["process 1/2", "process 2/2"], said
    # no --timeout-s: each process's limit comes from the claim's estimated cost, said once (issue 23)
    limits = [line for line in said if "time limit" in line]
    assert len(limits) == 1 and limits[0].startswith("rowsum-cpu: time limit 300 s a process, from its estimated"), said


def test_triton_kernel_on_cpu_is_checked_under_the_interpreter(project, hw):
    out = run_one(project / "claims/valid/triton-scale.yaml", project, hw, opts=opts(project))
    assert out.status == Status.SKIPPED and "checks passed" in out.reason, out.reason
    rec = load_record(out.record_path)
    assert rec.mode == "correctness-only" and rec.value is None and rec.published_value is None
    assert rec.protocol["verification_s"] > 0 and rec.protocol["timing_s"] == 0  # nothing was timed


def test_wrong_triton_kernel_is_incorrect_even_without_the_gpu(project, hw):
    out = run_one(project / "claims/wrong/triton-scale-no-mask-tail.yaml", project, hw, opts=opts(project))
    assert out.status == Status.INCORRECT, out.reason


def test_triton_standard_library_runs_under_the_interpreter_on_the_products_path(project, hw):
    """`tl.max` is a @triton.jit function of Triton's own, made at `import triton`: the side must
    come from a fork server that imported Triton with the interpreter on, or the check cannot run."""
    out = run_one(project / "claims/valid/triton-rowmax.yaml", project, hw, opts=opts(project))
    assert out.status == Status.SKIPPED and out.checked and "checks passed" in out.reason, out.reason


def test_a_kernel_wrong_only_when_interpreted_is_incorrect(project, hw):
    out = run_one(project / "claims/wrong/triton-rowmax-wrong-when-interpreted.yaml", project, hw, opts=opts(project))
    assert out.status == Status.INCORRECT, out.reason


def test_a_memory_declaration_the_inputs_contradict_is_rejected_in_the_trials(project, hw):
    """`check` estimates a claim's memory from its `workload.memory`; the trials hold the input
    bytes and output elements it declares to what the task really made, at every check shape."""
    text = (project / "claims/valid/triton-rowmax.yaml").read_text(encoding="utf-8")
    wrong = project / "claims/valid/triton-rowmax-wrong-memory.yaml"
    wrong.write_text(text.replace("id: triton-rowmax", "id: triton-rowmax-wrong-memory")
                     .replace('output_elements: "rows"', 'output_elements: "rows * 2"'), encoding="utf-8")
    try:
        out = run_one(wrong, project, hw, opts=opts(project))
    finally:
        wrong.unlink()
    assert out.status == Status.REJECTED, out.reason
    assert "workload.memory.output_elements gives 74 at {'rows': 37, 'cols': 100} (float32), but the reference has 37" \
        in out.reason, out.reason


def test_a_cpu_check_that_cannot_run_is_an_error_never_a_skip(project, hw):
    out = run_one(project / "claims/wrong/import-fails.yaml", project, hw, opts=opts(project))
    assert out.status == Status.ERROR and not out.checked, out.reason
    assert "CPU correctness check could not run" in out.reason and "planted fault" in out.reason, out.reason
    rec = load_record(out.record_path)
    assert (rec.verdict, decide(rec.evidence()).status) == ("error", Status.ERROR)


def test_a_skip_needs_a_cpu_check_that_passed():
    """decide() itself: hardware mismatch with no passing check is an error, whatever the runner said."""
    from claimbench.stats.verdict import Evidence
    base = dict(metric="speedup", claimed_value=2.0, tolerance=0.1, hardware_match=False, hardware_reason="needs X")
    assert decide(Evidence(**base, correctness_passed=True, correctness_reason="3 checks passed")).status == Status.SKIPPED
    for passed in (None, False):
        v = decide(Evidence(**base, correctness_passed=passed))
        assert v.status in (Status.ERROR, Status.INCORRECT) and v.status != Status.SKIPPED


def test_the_main_job_exits_1_on_a_planted_fault(project):
    """Through the CLI, as the README's main job runs it: one good claim and two planted faults."""
    import subprocess
    import sys
    res = subprocess.run([sys.executable, "-m", "claimbench", "run", "--results", str(project / "results-cli"),
                          "--threads", "1", "claims/valid/triton-rowmax.yaml", "claims/wrong/import-fails.yaml",
                          "claims/wrong/triton-rowmax-wrong-when-interpreted.yaml"],
                         cwd=project, capture_output=True, text=True, timeout=600)
    assert res.returncode == 1, res.stdout + res.stderr
    table = res.stdout
    assert "1 error, 1 incorrect, 1 skipped" in table, table
    assert "CPU correctness check could not run" in table and "checks passed" in table, table


def test_hardware_only_skips_without_running(project, hw):
    out = run_one(project / "claims/valid/triton-scale.yaml", project, hw, opts=opts(project, hardware_only=True))
    assert out.status == Status.SKIPPED and out.record_path is None


def _writes_record_claim(project, claim_id):
    claim = (project / "claims/valid/softmax-cpu.yaml").read_text()
    claim = claim.replace("id: softmax-cpu", f"id: {claim_id}").replace(
        "kernels/softmax_cpu_kernel.py:online_softmax", "kernels/cheat/writes_record.py:kernel")
    path = project / f"claims/{claim_id}.yaml"
    path.write_text(claim)
    return path


def test_without_a_sandbox_a_kernel_that_writes_into_results_is_an_error_and_undone(project, hw):
    # correctness only: the kernel writes on every call, and the census and the undo are the same either way
    out = run_one(_writes_record_claim(project, "writes-record"), project, hw,
                  opts=opts(project, sandbox="none", correctness_only=True))
    assert out.status == Status.ERROR and "changed files" in out.reason, out.reason
    assert "results/records/forged/forged.json" in out.reason
    assert not (project / "results/records/forged").exists()  # moved to results/.quarantine
    assert list((project / "results/.quarantine").rglob("forged.json"))


def test_under_landlock_the_project_is_read_only_and_nothing_is_undone(project, hw):
    """Landlock (no bubblewrap needed): the kernel's write into results/ is refused by the kernel of
    the OS, the claim ends in error with that refusal, and there is nothing to undo or quarantine."""
    from claimbench.machine import landlock
    if landlock.abi() < 1:
        pytest.skip("this kernel has no Landlock")
    out = run_one(_writes_record_claim(project, "writes-record-landlock"), project, hw,
                  opts=opts(project, sandbox="landlock", correctness_only=True))
    assert out.status == Status.ERROR and "Permission denied" in out.reason, out.reason
    assert "changed files" not in out.reason, out.reason
    assert not (project / "results/records/forged").exists()
    assert load_record(out.record_path).protocol["sandbox"] == "landlock"


def test_inside_bwrap_the_project_is_read_only(project, hw):
    from claimbench.orchestrator.sandbox import bwrap_works
    if not bwrap_works()[0]:
        pytest.skip("bubblewrap is not usable here")
    out = run_one(_writes_record_claim(project, "writes-record-bwrap"), project, hw, opts=opts(project, sandbox="bwrap", correctness_only=True))
    assert out.status == Status.ERROR and "Read-only file system" in out.reason, out.reason
    assert not (project / "results/records/forged").exists()


def test_run_cli_table_and_exit_codes(project, capsys):
    from claimbench.cli import main
    code = main(["--root", str(project), "run", str(project / "claims/wrong"), "--results",
                 str(project / "results"), "--format", "json", "--quiet"])
    rows = {r["claim"]: r for r in json.loads(capsys.readouterr().out)}
    assert code == 1 and rows["triton-scale-no-mask-tail"]["status"] == "incorrect"
    assert rows["import-fails"]["status"] == "error"
    assert main(["--root", str(project), "run", str(project / "nope")]) == 2


def test_run_claims_shares_one_fork_server_and_leaves_no_process_behind(project, monkeypatch):
    from claimbench import runner
    from claimbench.orchestrator import census, servers

    made = []
    real = servers.ForkServer

    class Recording(real):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(servers, "ForkServer", Recording)
    first = sorted((project / "claims/invalid").glob("*.yaml"))[0]
    good = project / "claims/valid/rowsum-cpu.yaml"
    import subprocess
    import sys
    import tempfile

    from claimbench.orchestrator.filecensus import BACKUP_PREFIX
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    left = Path(tempfile.gettempdir()) / f"{BACKUP_PREFIX}{gone.pid}-killed"  # what a kill -9 leaves
    left.mkdir()
    said: list[str] = []
    # correctness only: what is tested is the servers and the processes, not a number (timing is the
    # main job's, and test_cpu_claim_runs_to_a_verified_record... times this claim)
    # a Triton claim among them: on a CPU every side has Triton's interpreter switch, so one server
    # serves both kinds (before: a second server, one more torch import, for the Triton claim)
    triton = project / "claims/valid/triton-scale.yaml"
    _, outcomes = runner.run_claims([first, good, triton, good], project,
                                    opts(project, progress=said.append, correctness_only=True))
    assert not left.exists() and any(f"left by killed runs: {left}" in line for line in said), said
    assert outcomes[0].status == Status.REJECTED, outcomes[0].reason
    assert all(o.status == Status.SKIPPED and o.checked for o in outcomes[1:]), [o.reason for o in outcomes]
    assert len(made) == 1 and made[0].proc.poll() is not None  # started early, shared, closed at the end
    assert not census.tree([made[0].proc.pid])


def test_a_killed_fork_server_is_replaced_for_the_next_claim(project, hw):
    from claimbench.machine import backends
    from claimbench.orchestrator.servers import Servers

    o = opts(project, correctness_only=True)  # the servers are tested, not a number
    cpu_env = backends.child_env([], "cpu")  # the server a CPU claim's sides come from
    with Servers(project, o) as servers:
        first = servers.get(servers.sandbox(cuda=False), cpu_env)
        first.wait_ready()
        first.proc.kill()
        first.proc.wait()
        out = run_one(project / "claims/valid/rowsum-cpu.yaml", project, hw, opts=o, servers=servers)
        assert out.status == Status.SKIPPED and out.checked, out.reason
        (now,) = servers.running.values()  # the killed one replaced, under the same key
        assert now is not first and now.alive()


def test_the_table_shows_a_value_without_a_confidence_interval():
    """Issue 12: a claim ending with a value but no CI crashed the table at the end of `run`."""
    from claimbench.commands.run import format_table
    from claimbench.runner import Outcome

    out = Outcome("c", Path("c.yaml"), Status.INCONCLUSIVE, "fewer than 3 timed rounds", value=1.5,
                  metric="speedup", claimed_value=2.0, hardware="cpu")
    assert "1.5 [no CI]" in format_table([out])


def test_checked_claims_share_the_lock_only_where_no_census_sees_their_records(tmp_path):
    """A results folder outside the project is watched by each run writing into it: two checked
    claims side by side there took each other's records for planted ones (and quarantined them)."""
    from claimbench.runner import _census_blind_to

    root = tmp_path / "proj"
    root.mkdir()
    assert _census_blind_to(root / "results" / ".cache" / "test-records", root)
    assert not _census_blind_to(root / "results", root)
    assert not _census_blind_to(tmp_path / "elsewhere", root)


@pytest.mark.slow
def test_a_sweep_measures_each_point_after_the_claims_own_and_records_each(project, capsys):
    """Through the CLI: the claim's own point first, then the other one, each a whole record that
    audit's check finds consistent; the claim's row is its own point's, the point nests under it."""
    from claimbench.cli import main
    from claimbench.store.recordcheck import check_record

    results = project / "results-sweep"
    code = main(["--root", str(project), "run", str(project / "claims/valid/rowsum-cpu-sweep.yaml"), "--results",
                 str(results), "--format", "json", "--quiet", "--repeat", "1", "--threads", "1", "--max-time-s", "0.5",
                 "--warmup-s", "0.1", "--timing", "report"])
    (row,) = json.loads(capsys.readouterr().out)
    assert code == 0 and row["claim"] == "rowsum-cpu-sweep"
    assert [p["point"] for p in row["sweep"]] == ["rows=1024"]
    own, far = load_record(Path(row["record"])), load_record(Path(row["sweep"][0]["record"]))
    assert own.sweep_point is None and own.bytes == 2048 * 2048 * 4 + 2048 * 4
    assert far.sweep_point is not None and (far.sweep_point.axis, far.sweep_point.value) == ("rows", 1024)
    assert far.bytes == 1024 * 2048 * 4 + 1024 * 4 and far.workload == own.workload  # the claim, copied as it is
    assert far.correctness["passed"] is True and far.kernel.samples_us
    assert {t["params"]["rows"] for t in far.correctness["trials"]} >= {1024}  # checked at its own size
    assert own.created_utc < far.created_utc
    assert check_record(own) == [] and check_record(far) == []
    assert len(list((results / "records" / "rowsum-cpu-sweep").glob("*.json"))) == 2
    code = main(["--root", str(project), "run", str(project / "claims/valid/rowsum-cpu-sweep.yaml"), "--results",
                 str(results), "--format", "json", "--quiet", "--repeat", "1", "--threads", "1", "--max-time-s", "0.5",
                 "--warmup-s", "0.1", "--timing", "report", "--no-sweep"])
    (row,) = json.loads(capsys.readouterr().out)
    assert row["sweep"] == [] and len(list((results / "records" / "rowsum-cpu-sweep").glob("*.json"))) == 3
