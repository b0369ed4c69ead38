"""The runner end to end on CPU: a verified record, the CPU correctness fallback, repeats, isolation."""

import json
import shutil
from pathlib import Path

import pytest

from claimbench.detect import detect
from claimbench.record import load_record
from claimbench.runner import RunOptions, run_one
from claimbench.status import Status
from claimbench.verdict import decide

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
    return RunOptions(results=project / "results", timing={"max_time_s": 1.0, "warmup_s": 0.1}, threads=1, **kw)


def test_cpu_claim_runs_to_a_verified_record_that_audit_can_recompute(project, hw):
    out = run_one(project / "claims/valid/rowsum-cpu.yaml", project, hw, opts(project))
    assert out.status == Status.VERIFIED, out.reason
    rec = load_record(out.record_path)
    assert rec.published_value == rec.value and rec.value > 3.0 * 0.9
    assert rec.kernel.samples_us and rec.baseline.samples_us and rec.protocol["stop_reason"]
    assert rec.correctness["passed"] is True and len(rec.seeds) >= 4
    assert "kernels/rowsum.py" in rec.source_sha256 and rec.ceilings.get("bandwidth_gbps")
    v = decide(rec.evidence())
    assert (v.status.value, v.value, v.ci_low) == (rec.verdict, rec.value, rec.ci_low)
    assert out.record_path.parent == project / "results/records/rowsum-cpu"


def test_repeat_combines_processes_into_one_ci(project, hw):
    out = run_one(project / "claims/valid/rowsum-cpu.yaml", project, hw, opts(project, repeat=2))
    rec = load_record(out.record_path)
    assert set(rec.kernel.processes) == {0, 1} and rec.protocol["repeat"] == 2


def test_triton_kernel_on_cpu_is_checked_under_the_interpreter(project, hw):
    out = run_one(project / "claims/valid/triton-scale.yaml", project, hw, opts(project))
    assert out.status == Status.SKIPPED and "checks passed" in out.reason, out.reason
    rec = load_record(out.record_path)
    assert rec.mode == "correctness-only" and rec.value is None and rec.published_value is None


def test_wrong_triton_kernel_is_incorrect_even_without_the_gpu(project, hw):
    out = run_one(project / "claims/wrong/triton-scale-no-mask-tail.yaml", project, hw, opts(project))
    assert out.status == Status.INCORRECT, out.reason


def test_hardware_only_skips_without_running(project, hw):
    out = run_one(project / "claims/valid/triton-scale.yaml", project, hw, opts(project, hardware_only=True))
    assert out.status == Status.SKIPPED and out.record_path is None


def test_a_child_that_writes_into_results_is_an_error(project, hw):
    claim = (project / "claims/valid/softmax-cpu.yaml").read_text()
    claim = claim.replace("id: softmax-cpu", "id: writes-record").replace(
        "kernels/softmax_cpu_kernel.py:online_softmax", "kernels/cheat/writes_record.py:kernel")
    path = project / "claims/writes-record.yaml"
    path.write_text(claim)
    out = run_one(path, project, hw, opts(project))
    assert out.status == Status.ERROR and "results folder" in out.reason


def test_run_cli_table_and_exit_codes(project, capsys):
    from claimbench.cli import main
    code = main(["--root", str(project), "run", str(project / "claims/wrong"), "--results",
                 str(project / "results"), "--json", "--quiet"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 1 and rows[0]["status"] == "incorrect"
    assert main(["--root", str(project), "run", str(project / "nope")]) == 2


def test_run_claims_starts_the_first_process_early_and_ends_it_when_unused(project, monkeypatch):
    from claimbench import execute, runner

    made = []
    real = execute.ClaimProcess

    class Recording(real):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            made.append(self)

    monkeypatch.setattr(execute, "ClaimProcess", Recording)
    bad = project / "claims/invalid"
    first = sorted(bad.glob("*.yaml"))[0]
    good = project / "claims/valid/rowsum-cpu.yaml"
    _, outcomes = runner.run_claims([first, good], project, opts(project))
    assert outcomes[0].status == Status.REJECTED and outcomes[1].status == Status.VERIFIED, outcomes[1].reason
    assert made[0].used and made[0].proc.poll() is not None  # rejected claim: the early process was ended
    assert len(made) == 2 and made[1].used  # the second claim got a process of its own


def test_a_process_that_dies_before_its_job_reports_why(project):
    from claimbench import execute

    child = execute.ClaimProcess(project)
    child.proc.kill()
    res = execute.run_child({"log_path": str(project / "results/.cache/logs/dead.log")}, env_extra={},
                            timeout_s=5.0, cwd=project, started=child)
    assert res["outcome"] == "error" and "before reporting" in res["outcome_reason"]
