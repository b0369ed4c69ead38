"""The protocol-4 rules: a narrow CI and a quiet machine are part of `verified`; older records keep theirs."""

import math

import numpy as np
import pytest

from claimbench.stats import precision as P
from claimbench.stats.resample import bootstrap_ci
from claimbench.stats.status import Status
from claimbench.stats.verdict import Evidence, Samples, decide


def sides(k_us, b_us, n=200, noise=1.0, seed=0, per_round=10):
    r = np.random.default_rng(seed)
    rounds = [i // per_round for i in range(n)]
    k = Samples(list(k_us + r.normal(0, noise, n)), rounds, [0] * n)
    b = Samples(list(b_us + r.normal(0, noise, n)), rounds, [0] * n)
    return k, b


def ev(noise=1.0, seed=0, **kw):
    k, b = sides(100, 150, noise=noise, seed=seed)
    base = dict(metric="speedup", claimed_value=1.2, tolerance=0.05, correctness_passed=True,
                kernel=k, baseline=b, protocol_version=4, device="cpu")
    base.update(kw)
    return Evidence(**base)


def width(e: Evidence) -> float:
    return P.halfwidth_fraction(*bootstrap_ci(e.metric, e.kernel, e.baseline))


def test_the_sample_sets_sit_where_the_tests_need_them():
    assert width(ev(noise=1)) < 0.01
    assert 0.02 < width(ev(noise=10)) < 0.05       # between the GPU and the CPU default
    assert 0.08 < width(ev(noise=40)) < 0.15       # wider than both, but its lower bound clears 1.14
    assert bootstrap_ci("speedup", ev(noise=40).kernel, ev(noise=40).baseline)[1] > 1.2 * 0.95


def test_a_wide_ci_that_clears_the_threshold_is_inconclusive_from_protocol_4():
    v = decide(ev(noise=40))
    frac = width(ev(noise=40))
    assert v.status == Status.INCONCLUSIVE and v.published_value is None
    assert f"CI too wide: half-width {frac:.1%} of the value, above 5.0% (the cpu default)" in v.reason
    assert "--repeat 3 or more" in v.reason  # one process: what would settle it (stats/settle.py)
    assert v.value is not None and v.ci_low > 1.14  # the numbers stay in the verdict


@pytest.mark.parametrize("protocol", [None, 1, 2, 3])
def test_older_protocols_are_decided_exactly_as_before(protocol):
    old = decide(ev(noise=40, protocol_version=protocol, other_cpu_fraction=0.9))
    assert old.status == Status.VERIFIED and "±" not in old.reason and "busy" not in old.reason


def test_device_defaults_two_percent_gpu_five_percent_cpu():
    assert P.MAX_CI_HALFWIDTH == {"cuda": 0.02, "cpu": 0.05}
    mid = dict(noise=10)  # about 2.6%
    assert decide(ev(**mid, device="cpu")).status == Status.VERIFIED
    v = decide(ev(**mid, device="cuda"))
    assert v.status == Status.INCONCLUSIVE and "above 2.0% (the cuda default)" in v.reason
    assert decide(ev(**mid, device="")).status == Status.INCONCLUSIVE  # unknown device: the strictest


def test_verified_reason_shows_the_width():
    v = decide(ev(noise=1))
    assert v.status == Status.VERIFIED and v.reason.endswith(f"±{width(ev(noise=1)):.1%}")


def test_a_claim_tightens_or_loosens_its_own_bound():
    v = decide(ev(noise=10, max_ci_halfwidth=0.01))
    assert v.status == Status.INCONCLUSIVE and "above 1.0% (the claim's max_ci_halfwidth)" in v.reason
    assert decide(ev(noise=40, max_ci_halfwidth=0.2)).status == Status.VERIFIED


def test_refuted_and_straddling_are_not_changed_by_the_width():
    assert decide(ev(noise=40, claimed_value=3.0)).status == Status.REFUTED
    v = decide(ev(noise=40, claimed_value=1.45))
    assert v.status == Status.INCONCLUSIVE and "straddles" in v.reason


def test_a_busy_cpu_is_a_reason_not_a_number():
    v = decide(ev(noise=1, other_cpu_fraction=0.37))
    assert v.status == Status.INCONCLUSIVE and v.published_value is None
    assert v.reason.startswith("machine busy: 37% of the cores were used by other processes")
    # a refutation from the neighbours' work is not one either
    assert decide(ev(noise=1, claimed_value=3.0, other_cpu_fraction=0.37)).status == Status.INCONCLUSIVE
    assert decide(ev(noise=1, other_cpu_fraction=P.BUSY_CPU_FRACTION)).status == Status.VERIFIED  # at the level: quiet
    assert decide(ev(noise=1, other_cpu_fraction=None)).status == Status.VERIFIED                 # not measured
    assert decide(ev(noise=1, device="cuda", other_cpu_fraction=0.9)).status == Status.VERIFIED   # a GPU claim


def test_other_gpu_processes_block_verified_on_a_gpu():
    v = decide(ev(noise=1, device="cuda", other_gpu_processes=2))
    assert v.status == Status.INCONCLUSIVE and "2 other processes used the GPU during the timed rounds" in v.reason
    assert decide(ev(noise=1, device="cuda", other_gpu_processes=0)).status == Status.VERIFIED
    assert decide(ev(noise=1, device="cuda", claimed_value=3.0, other_gpu_processes=1)).status == Status.REFUTED


def test_halfwidth_fraction_edges():
    assert P.halfwidth_fraction(2.0, 1.9, 2.1) == pytest.approx(0.05)
    assert P.halfwidth_fraction(-2.0, -2.1, -1.9) == pytest.approx(0.05)
    assert math.isinf(P.halfwidth_fraction(0.0, -1, 1)) and math.isinf(P.halfwidth_fraction(1.0, math.nan, 2))


def test_precision_reached_needs_rounds_and_a_narrow_ci():
    k, b = sides(100, 150, n=20, per_round=10)  # two rounds: no interval yet
    assert P.precision_reached(k, b, "speedup", device="cpu") == (False, math.inf)
    k, b = sides(100, 150, noise=1)
    done, frac = P.precision_reached(k, b, "speedup", device="cuda")
    assert done and frac < 0.01
    k, b = sides(100, 150, noise=40)
    done, frac = P.precision_reached(k, b, "speedup", device="cpu")
    assert not done and 0.08 < frac < 0.15
    assert P.precision_reached(k, b, "speedup", device="cpu", max_ci_halfwidth=0.2)[0]
    k, _ = sides(100, 0, noise=1)
    assert P.precision_reached(k, None, "time_us", device="cpu")[0]


def test_precision_reached_stops_only_where_the_verdict_agrees():
    """Rounds arrive one at a time; whenever the stopping rule says stop, the verdict's full
    bootstrap must find the CI narrow enough too."""
    rng = np.random.default_rng(5)
    stops = 0
    for _trial in range(8):
        kx, bx, rounds = [], [], []
        for r in range(80):
            kx += list(100 + rng.normal(0, 8, 5))
            bx += list(150 + rng.normal(0, 8, 5))
            rounds += [r] * 5
            k, b = Samples(kx, rounds, [0] * len(kx)), Samples(bx, rounds, [0] * len(bx))
            done, _ = P.precision_reached(k, b, "speedup", device="cuda")
            if done:
                stops += 1
                assert "too wide" not in decide(Evidence(metric="speedup", claimed_value=1.2, tolerance=0.05,
                                                         correctness_passed=True, kernel=k, baseline=b,
                                                         protocol_version=4, device="cuda")).reason
                break
    assert stops == 8


def test_record_carries_the_fields_into_evidence():
    from claimbench.store.record import Record

    fields = dict(protocol_version=4, claim_id="x", created_utc="2026-01-01T00:00:00.000000Z", harness_version="0",
                  claim_sha256="0" * 64, claim_path="claims/x.yaml", verdict="error", reason="",
                  claimed={"metric": "speedup", "value": 1.2, "tolerance": 0.05, "max_ci_halfwidth": 0.03},
                  hardware={"device": "cpu"}, protocol={"device": "cpu", "machine_load": {
                      "other_cpu_fraction": 0.25, "other_gpu_processes": None}})
    e = Record.model_validate(fields).evidence()
    assert (e.protocol_version, e.device, e.max_ci_halfwidth, e.other_cpu_fraction, e.other_gpu_processes) == \
        (4, "cpu", 0.03, 0.25, None)
    old = Record.model_validate({**fields, "protocol_version": 3, "protocol": {}, "hardware": {}}).evidence()
    assert (old.protocol_version, old.device, old.other_cpu_fraction) == (3, "", None)
