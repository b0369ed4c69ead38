"""Record assembly from typed runs: samples of every process combined and tagged, the first failure
wins, a file the claim's processes changed is an error that keeps the runs' evidence, and a CPU check
that could not run is an error, never a skip."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from claimbench.gate.policy import gate_file
from claimbench.machine.hardware import CpuInfo, Hardware, Software
from claimbench.orchestrator.assemble import RunContext, assemble_record
from claimbench.orchestrator.job import BracketSummary, ClaimRun, Correctness, SideBracket
from claimbench.orchestrator.protocol import PairTiming, SideSamples

FIX = Path(__file__).resolve().parents[1] / "fixtures"
CLAIM_PATH = FIX / "claims" / "valid" / "softmax-cpu.yaml"
CPU = Hardware("cpu", (), CpuInfo("Fake CPU", 2, 2, None, None), Software("3.11", "2.13", None, None, None, "0.1", "abc", False))
PASSED = Correctness(passed=True, reason="5 checks passed")


def _timing(kernel_us: float, baseline_us: float, n: int = 30) -> PairTiming:
    def side(us: float) -> SideSamples:
        return SideSamples(samples_us=tuple(us * (1 + 0.001 * (i % 3)) for i in range(n)),
                           rounds=tuple(i // 5 for i in range(n)), dropped_us=(), dropped_rounds=(),
                           dropped_throttled=0, median_us=us, iqr_us=None, rse=None, clocks_mhz=None,
                           throttle_reasons_seen=0, calls_per_block=1, throttled_majority=False)
    return PairTiming(kernel=side(kernel_us), baseline=side(baseline_us), warmup_s=0.1, warmup_calls=3,
                      stop_reason="test", mode="cpu", timer="perf_counter_ns", flush_bytes=None, l2_reset=None,
                      calls_per_block={"kernel": 1, "baseline": 1}, n_rounds=n // 5, elapsed_s=1.0,
                      throttled_majority=False)


@pytest.fixture(scope="module")
def ctx() -> RunContext:
    claim = gate_file(CLAIM_PATH, FIX).claim
    assert claim is not None
    return RunContext(claim=claim, claim_path=CLAIM_PATH, root=FIX, hw=CPU, matched=True, why="matches",
                      dtype="float32", device="cpu", sandbox="none: test")


def test_samples_of_every_process_are_combined_and_tagged(ctx):
    runs = [ClaimRun(correctness=PASSED, timing=_timing(10.0, 20.0)),
            ClaimRun(correctness=PASSED, timing=_timing(11.0, 21.0))]
    rec = assemble_record(ctx, runs)
    assert len(rec.kernel.samples_us) == 60 and rec.kernel.processes == [0] * 30 + [1] * 30
    assert rec.kernel.rounds[:6] == [0, 0, 0, 0, 0, 1]
    assert 10.0 <= rec.kernel.median_us <= 11.1 and rec.baseline.median_us > rec.kernel.median_us
    assert rec.protocol["repeat"] == 2 and rec.protocol["sandbox"] == "none: test"
    assert rec.correctness["passed"] is True and rec.outcome is None


def test_the_first_failure_speaks_for_the_run(ctx):
    runs = [ClaimRun(correctness=PASSED, timing=_timing(10.0, 20.0)),
            ClaimRun(correctness=Correctness(passed=False, reason="trial 2: wrong")),
            ClaimRun(correctness=PASSED)]
    rec = assemble_record(ctx, runs)  # one process's failed check is the claim's, whatever the others found
    assert rec.verdict == "incorrect" and rec.correctness["reason"] == "trial 2: wrong"
    crashed = assemble_record(ctx, [ClaimRun(outcome="timeout", outcome_reason="no result in 5 s"),
                                    ClaimRun(outcome="error", outcome_reason="later")])
    assert crashed.outcome == "timeout" and crashed.outcome_reason == "no result in 5 s"


def test_changed_files_make_an_error_that_keeps_the_runs_evidence(ctx):
    touched = RunContext(**{**ctx.__dict__, "touched": "the claim's processes changed files they must not touch: x"})
    rec = assemble_record(touched, [ClaimRun(correctness=PASSED, timing=_timing(10.0, 20.0))])
    assert rec.verdict == "error" and rec.outcome == "error" and "must not touch" in rec.reason
    assert len(rec.kernel.samples_us) == 30 and rec.protocol["repeat"] == 1  # no run was invented


def test_a_cpu_check_that_could_not_run_is_an_error_naming_why(ctx):
    off = RunContext(**{**ctx.__dict__, "matched": False, "why": "needs NVIDIA H200*, found CPU"})
    rec = assemble_record(off, [ClaimRun(outcome="error", outcome_reason="side died")])
    assert rec.verdict == "error" and rec.mode == "correctness-only"
    assert rec.outcome_reason == "needs NVIDIA H200*, found CPU; CPU correctness check could not run: side died"


def test_from_dict_keeps_known_fields_as_the_dataclass_types():
    run = ClaimRun.from_dict({"outcome": None, "rejections": ["a"], "sources": ["kernels/k.py"], "planted": 1})
    assert run.rejections == ("a",) and run.sources == ("kernels/k.py",) and not hasattr(run, "planted")


def test_a_run_survives_its_json_with_every_nested_type():
    """A rank process writes its run as JSON and the launcher reads it back: nothing may come back a dict."""
    import json

    run = ClaimRun(correctness=PASSED, timing=_timing(10.0, 20.0), seeds={"trials": [1, 2], "timing": 3},
                   bracket=BracketSummary(null_us={"kernel": 3.0}, kernel=SideBracket(10.0, 9.5, 30)))
    back = ClaimRun.from_dict(json.loads(json.dumps(run.to_dict())))
    assert back == run
    assert isinstance(back.timing, PairTiming) and isinstance(back.timing.kernel, SideSamples)
    assert isinstance(back.correctness, Correctness) and isinstance(back.bracket.kernel, SideBracket)
    assert "baseline" not in back.bracket.as_record()  # a side never timed is absent, as before


def test_a_run_whose_json_has_the_wrong_types_is_refused():
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ClaimRun.from_dict({"timing": {"kernel": "fast"}})


@pytest.mark.parametrize("kernel_us,settles", [(120.0, "a quieter machine settles it"), (20.0, "make the workload larger")])
def test_blocks_of_calls_say_whether_the_machine_or_the_workload_caused_them(ctx, kernel_us, settles):
    timing = replace(_timing(kernel_us, kernel_us * 3), calls_per_block={"kernel": 4, "baseline": 1},
                     config={"min_block_us": 50.0})
    rec = assemble_record(ctx, [ClaimRun(correctness=PASSED, timing=timing, bracket=BracketSummary(null_iqr_us={"kernel": 200.0}))])
    assert rec.verdict == "inconclusive" and settles in rec.reason, rec.reason


def test_blocks_in_any_process_block_verified_not_in_the_last_alone(ctx):
    """Each process adds its samples to the CI: a kernel replaying its answer within a block ran at 6x in two
    processes of three while the last timed it call by call (an adversarial review), and only the last
    process's block size was read."""
    blocked = replace(_timing(20.0, 60.0), calls_per_block={"kernel": 4, "baseline": 1}, config={"min_block_us": 50.0})
    plain = _timing(20.0, 60.0)
    rec = assemble_record(ctx, [ClaimRun(correctness=PASSED, timing=blocked), ClaimRun(correctness=PASSED, timing=blocked),
                                ClaimRun(correctness=PASSED, timing=plain)])
    assert any("timed in blocks of 4" in b for b in rec.blockers), rec.blockers
    assert sum("blocks of" in b for b in rec.blockers) == 1, rec.blockers  # said once, not once a process


def test_timed_calls_that_prove_nothing_block_verified():
    """A measured run whose timed calls were never checked, or never saw a changed input, cannot verify:
    either way a timed call could have returned anything, or a result kept from an earlier call."""
    import types

    from claimbench.orchestrator.assemble import _unchecked
    from claimbench.orchestrator.job import TimedChecks

    def run(**kw):
        return types.SimpleNamespace(timing=object(), timed_checks=TimedChecks(**kw))

    assert _unchecked([run(checked=4, perturbed=20), run(checked=3, perturbed=15)]) == ()
    assert "was checked" in _unchecked([run(checked=0, perturbed=20), run(checked=0, perturbed=15)])[0]
    assert "no input changed" in _unchecked([run(checked=4, perturbed=0)])[0]
    assert "was checked" in _unchecked([types.SimpleNamespace(timing=object(), timed_checks=None)])[0]
    assert _unchecked([types.SimpleNamespace(timing=None, timed_checks=None)]) == ()  # no timing: nothing to say
