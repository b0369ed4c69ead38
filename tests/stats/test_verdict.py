"""verdict.decide: precedence, the CI rule per metric, the mirror rule, blockers and throttling."""

import numpy as np
import pytest

from claimbench.stats.resample import bootstrap_ci
from claimbench.stats.status import Status
from claimbench.stats.verdict import Evidence, Samples, decide


def sides(k_us, b_us, n=200, noise=1.0, seed=0, per_round=10):
    r = np.random.default_rng(seed)
    rounds = [i // per_round for i in range(n)]
    k = Samples(list(k_us + r.normal(0, noise, n)), rounds, [0] * n)
    b = Samples(list(b_us + r.normal(0, noise, n)), rounds, [0] * n)
    return k, b


def ev(**kw):
    base = dict(metric="speedup", claimed_value=1.4, tolerance=0.05, correctness_passed=True)
    base.update(kw)
    return Evidence(**base)


def test_verified_refuted_inconclusive_for_speedup():
    k, b = sides(100, 150)
    assert decide(ev(kernel=k, baseline=b)).status == Status.VERIFIED
    assert decide(ev(kernel=k, baseline=b, claimed_value=2.0)).status == Status.REFUTED
    k2, b2 = sides(100, 150, noise=40, n=20, per_round=5)
    v = decide(ev(kernel=k2, baseline=b2, claimed_value=1.5))
    assert v.status == Status.INCONCLUSIVE and v.ci_low < 1.5 * 0.95 < v.ci_high


def test_published_value_only_when_verified():
    k, b = sides(100, 150)
    ok = decide(ev(kernel=k, baseline=b))
    bad = decide(ev(kernel=k, baseline=b, claimed_value=3))
    assert ok.published_value == ok.value and bad.published_value is None


def test_time_us_uses_the_mirror_rule():
    k, _ = sides(100, 0)
    assert decide(ev(metric="time_us", claimed_value=101, kernel=k)).status == Status.VERIFIED
    assert decide(ev(metric="time_us", claimed_value=80, kernel=k)).status == Status.REFUTED


def test_precedence_error_then_rejected_then_incorrect_then_skipped():
    k, b = sides(100, 150)
    assert decide(ev(outcome="timeout", outcome_reason="t", rejections=("x",))).status == Status.TIMEOUT
    assert decide(ev(rejections=("static rule",), correctness_passed=False)).status == Status.REJECTED
    assert decide(ev(correctness_passed=False, hardware_match=False)).status == Status.INCORRECT
    v = decide(ev(hardware_match=False, hardware_reason="needs H100", correctness_reason="3 checks passed"))
    assert v.status == Status.SKIPPED and "needs H100" in v.reason and "3 checks" in v.reason
    assert decide(ev(correctness_passed=None, kernel=k, baseline=b)).status == Status.ERROR


def test_blockers_and_throttling_keep_a_good_number_from_verified():
    k, b = sides(100, 150)
    v = decide(ev(kernel=k, baseline=b, blockers=("another process (pid 7) is using GPU 0",)))
    assert v.status == Status.INCONCLUSIVE and "pid 7" in v.reason
    v = decide(ev(kernel=k, baseline=b, throttled_majority=True))
    assert v.status == Status.INCONCLUSIVE and "throttl" in v.reason
    v = decide(ev(kernel=None, baseline=None, throttled_majority=True))
    assert v.status == Status.INCONCLUSIVE and v.value is None


def test_physics_floor_and_declared_bytes():
    k, b = sides(100, 150)
    assert decide(ev(kernel=k, baseline=b, floor_us=120.0, floor_term="memory")).status == Status.REJECTED
    assert decide(ev(kernel=k, baseline=b, floor_us=105.0)).status == Status.VERIFIED  # 100 >= 0.9 * 105
    v = decide(ev(kernel=k, baseline=b, bytes=1e9, tensor_bytes=1e6))
    assert v.status == Status.REJECTED and "declared bytes" in v.reason


@pytest.mark.parametrize("metric,expect", [("tflops", 2e12 / 100 / 1e6), ("gbps", 4e9 / 100 / 1e3), ("sol_fraction", 0.5)])
def test_rate_metrics(metric, expect):
    k, _ = sides(100, 0, noise=0.01)
    v, lo, hi = bootstrap_ci(metric, k, Samples((), (), ()), flops=2e12, nbytes=4e9, floor_us=50.0)
    assert v == pytest.approx(expect, rel=1e-3) and lo <= v <= hi


def test_bootstrap_is_deterministic_and_covers_process_variance():
    k, b = sides(100, 150)
    assert bootstrap_ci("speedup", k, b) == bootstrap_ci("speedup", k, b)
    r = np.random.default_rng(1)
    # three processes whose kernel medians differ by 10%: the CI must widen to show it
    ks = [100 * (1 + 0.1 * p) + r.normal(0, 0.5) for p in range(3) for _ in range(60)]
    procs = [p for p in range(3) for _ in range(60)]
    rounds = [i // 10 for p in range(3) for i in range(60)]
    k3 = Samples(ks, rounds, procs)
    b3 = Samples([150 + r.normal(0, 0.5) for _ in range(180)], rounds, procs)
    _, lo1, hi1 = bootstrap_ci("speedup", *sides(100, 150))
    _, lo3, hi3 = bootstrap_ci("speedup", k3, b3)
    assert (hi3 - lo3) > 5 * (hi1 - lo1)


def _procs(n_procs, k_us=100.0, b_us=150.0, n=240, seed=3):
    r = np.random.default_rng(seed)
    rounds = [i // 10 for i in range(n)]
    procs = [i * n_procs // n for i in range(n)]
    return (Samples(list(k_us + r.normal(0, 0.5, n)), rounds, procs),
            Samples(list(b_us + r.normal(0, 0.5, n)), rounds, procs))


@pytest.mark.parametrize("device, protocol, n_procs, status", [
    ("cpu", 5, 1, Status.INCONCLUSIVE),   # one process cannot show a CPU's run-to-run spread
    ("cpu", 5, 2, Status.INCONCLUSIVE),
    ("cpu", 5, 3, Status.VERIFIED),
    ("cpu", 4, 1, Status.VERIFIED),       # a protocol-4 record keeps the rules it was made under
    ("cuda", 5, 1, Status.VERIFIED),      # a GPU number may come from one process
])
def test_a_cpu_number_needs_several_processes(device, protocol, n_procs, status):
    k, b = _procs(n_procs)
    v = decide(ev(kernel=k, baseline=b, device=device, protocol_version=protocol, other_cpu_fraction=0.0))
    assert v.status == status, v.reason
    if status == Status.INCONCLUSIVE:
        assert "run-to-run spread" in v.reason and "--repeat 3" in v.reason and v.published_value is None
