"""The exploit fixtures: every cheat must be kept from `verified`, through the real runner.

Each case writes a claim into a temporary project (a copy of tests/fixtures) and runs it with
`run_one`: policy, a child process, verification, timing and the verdict, as `claimbench run` does.
"""

from __future__ import annotations

import pytest
from cheat_project import make_project, write_claim

from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.runner import run_one
from claimbench.stats.status import Status

# cheat file -> statuses it may end in (never verified), and a word (or a tuple of alternatives) the reason must contain
CASES = {
    "zeros": ({Status.INCORRECT}, "zeros"),
    "fingerprint_cache": ({Status.REJECTED, Status.INCORRECT, Status.INCONCLUSIVE}, ""),
    "prepare_answer": ({Status.REJECTED}, "prepare"),
    "nan": ({Status.INCORRECT}, "NaN"),
    "empty_like": ({Status.INCORRECT, Status.REJECTED}, ""),
    "mutate_input": ({Status.REJECTED, Status.INCORRECT}, "changed its inputs"),
    "mutate_late": ({Status.REJECTED, Status.INCORRECT}, ""),
    # caught in timing, or already in a trial when the allocator hands the same address back
    "data_ptr_cache": ({Status.REJECTED, Status.INCORRECT}, ("wrong answers", "rel l2")),
    "first_n_calls": ({Status.REJECTED, Status.INCORRECT}, "wrong answers"),
    "tail_drop": ({Status.INCORRECT}, ""),
    "lower_precision": ({Status.INCORRECT}, "relative L2"),
    "calls_baseline": ({Status.REJECTED}, "baseline"),
    "getattr_forbidden": ({Status.REJECTED}, "forbidden"),
    "torch_ops_forbidden": ({Status.REJECTED}, ("forbidden op", "which the claim forbids")),
    "patch_timer": ({Status.REJECTED}, ""),
    "slow_baseline": ({Status.REJECTED}, "torch.softmax"),
    "slow_baseline_hidden": ({Status.REJECTED}, ""),
    "gc_dig": ({Status.REJECTED}, "gc"),
    "gc_dig_hidden": ({Status.REJECTED}, ""),
    "subclass_liar": ({Status.REJECTED, Status.INCORRECT}, "subclass"),
    "late_thread": ({Status.REJECTED, Status.INCORRECT}, ""),
    "forged_report": ({Status.ERROR}, ("frame", "answered", "malformed")),  # writing into its channel breaks the protocol
    "crash_exit": ({Status.ERROR}, "status 3"),
    "crash_raise": ({Status.ERROR}, "exploded"),
}


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("proj"))


@pytest.fixture(scope="module")
def hw(project):
    return detect(project)


@pytest.fixture(scope="module")
def servers(project):
    """One fork server for the module: torch is imported once, not once per case."""
    from claimbench.orchestrator.servers import Servers

    with Servers(project, RunOptions(results=project / "results"), pooled=True) as s:
        yield s


# fields some cases need beyond the template's defaults
EXTRA = {
    "prepare_answer": {"kernel_extra": ', prepare: "kernels/cheat/prepare_answer.py:prepare"'},
    # large enough that each call is timed alone (CPU blocks hold calls under 50 us)
    "fingerprint_cache": {"params": "{rows: 256, cols: 2000}"},
    "mutate_late": {"properties": "  properties: [deterministic]\n"},
}


# One process (`one_process`, conftest.py): every rule these cheats meet acts within a process; 0.9 s holds
# the rounds three processes of 0.3 s held.
pytestmark = pytest.mark.usefixtures("one_process")
SHORT = TimingLimits(max_time_s=0.9, warmup_s=0.05)


def _run(project, hw, name, file, *, servers=None, bytes_="8 * rows * cols", flops="", timeout_s=120.0,
         timing: TimingLimits = SHORT):
    path = write_claim(project, name.replace("_", "-"), file, bytes=bytes_, flops=flops, **EXTRA.get(name, {}))
    opts = RunOptions(results=project / "results", timeout_s=timeout_s, timing=timing)
    return run_one(path, project, hw, opts=opts, servers=servers)


@pytest.mark.parametrize("name", sorted(CASES))
def test_cheat_is_never_verified(project, hw, name, servers):
    allowed, word = CASES[name]
    out = _run(project, hw, name, name, servers=servers)
    assert out.status != Status.VERIFIED
    assert out.status in allowed, (out.status, out.reason)
    words = (word,) if isinstance(word, str) else word
    assert any(w.lower() in out.reason.lower() for w in words), out.reason


def test_the_first_wrong_timed_answer_ends_the_claim_rejected(project, hw, servers):
    """One wrong timed answer decides the verdict: the claim stops there, its later rounds and its
    second and third processes never run (before, all three ran, to reject it anyway), and the record
    keeps the checks made until then."""
    from claimbench.store.record import load_record

    # at least 30 kernel samples a process, whatever the load: its 13th call (stale from then on) falls in
    # the first process's timed rounds (under a loaded test run, 0.3 s of rounds held fewer, and the second
    # process caught it)
    out = _run(project, hw, "first_n_stops", "first_n_calls", servers=servers,
               timing=TimingLimits(max_time_s=30.0, warmup_s=0.05, min_samples=30))
    assert out.status == Status.REJECTED and "wrong answers (1 of " in out.reason, out.reason
    rec = load_record(out.record_path)
    assert rec.protocol["repeat"] == 1, rec.protocol["repeat"]
    checks = rec.protocol["timed_checks"]
    assert checks["failed"] == 1 and checks["checked"] >= 1, checks


def test_hang_is_a_timeout_and_the_next_claim_still_runs(project, hw, servers):
    out = _run(project, hw, "crash_hang", "crash_hang", timeout_s=8.0, servers=servers)
    assert out.status == Status.TIMEOUT
    after = _run(project, hw, "zeros_after_hang", "zeros", servers=servers)
    assert after.status == Status.INCORRECT


def test_inflated_bytes_are_rejected(project, hw, servers):
    out = _run(project, hw, "inflated_bytes", "honest", bytes_="1000 * rows * cols", servers=servers)
    # caught at the first check, before any timing (orchestrator/unread.py); the verdict's own rule, declared
    # bytes above the measured tensors, stays behind it
    assert out.status == Status.REJECTED and "workload.bytes counts" in out.reason, out.reason


def test_beating_the_physics_floor_is_rejected(project, hw, servers):
    out = _run(project, hw, "beats_floor", "honest", flops='  flops: "1.0e15 * rows"\n', servers=servers)
    assert out.status == Status.REJECTED and "physics floor" in out.reason, (out.status, out.reason)


def test_honest_kernel_gets_a_timing_verdict_and_a_record(project, hw, servers):
    out = _run(project, hw, "honest_run", "honest", servers=servers)
    assert out.status in (Status.VERIFIED, Status.INCONCLUSIVE, Status.REFUTED), out.reason
    assert out.record_path is not None and out.record_path.is_file()



@pytest.mark.slow
def test_a_kernel_running_half_its_work_on_a_thread_of_its_own_gets_no_second_core(project, hw):
    """With `--threads 1` both sides are pinned to the same one CPU, so a kernel that starts a thread
    per call (gone before any census sees it) cannot take a core its rival never had. Unpinned, on
    this 2-core machine, it measured 0.484 where the honest kernel measured 0.329 (2026-12-03); the
    claimed 0.45 is what only the trick reaches."""
    import os

    from claimbench.store.record import load_record

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one CPU here: there is no second core to take")
    path = write_claim(project, "extra-threads", "extra_threads", bytes="8 * rows * cols",
                       params="{rows: 1024, cols: 4096}", value="0.45")
    opts = RunOptions(results=project / "results", threads=1, repeat=1, timing=TimingLimits(max_time_s=2.0, warmup_s=0.1))
    out = run_one(path, project, hw, opts=opts)
    assert out.status != Status.VERIFIED, out.reason
    census = load_record(out.record_path).protocol["census"]
    if census is None:  # the census caught the thread itself between rounds (it had not yet exited): also fine
        assert out.status == Status.REJECTED and "threads" in out.reason, (out.status, out.reason)
    else:
        assert census["kernel"]["affinity"] == census["baseline"]["affinity"] and len(census["kernel"]["affinity"]) == 1
    honest = run_one(write_claim(project, "one-cpu-honest", "honest", bytes="8 * rows * cols",
                                 params="{rows: 1024, cols: 4096}", value="0.45"), project, hw, opts=opts)
    census = load_record(honest.record_path).protocol["census"]
    assert census is not None, (honest.status, honest.reason)
    assert census["kernel"]["affinity"] == census["baseline"]["affinity"] and len(census["kernel"]["affinity"]) == 1
    assert len(census["task"]["affinity"]) == len(os.sched_getaffinity(0))  # the reference is not held to one core
