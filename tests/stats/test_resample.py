"""The batched bootstrap must give the numbers of the plain definition: resample, sort, take the median."""

import math

import numpy as np
import pytest

from claimbench.stats import resample as B
from claimbench.stats.verdict import Evidence, decide, decide_many


def plain_ci(metric, kernel, baseline, resamples=B.RESAMPLES, nbytes=None):
    """The definition, written the slow way: build every resample and sort it."""
    def by_round(side):
        groups = {}
        for x, r, p in zip(side.samples_us, side.rounds, side.processes):
            groups.setdefault((p, r), []).append(x)
        return {k: float(np.median(v)) for k, v in groups.items()}

    paired = metric == "speedup"
    kb, bb = by_round(kernel), (by_round(baseline) if paired else {})
    keys = sorted(set(kb) & set(bb)) if paired else sorted(kb)
    kmed = float(np.median([kb[k] for k in keys]))
    bmed = float(np.median([bb[k] for k in keys])) if paired else math.nan
    value = B.metric_value(metric, kmed, bmed, flops=None, nbytes=nbytes, floor_us=None)
    if len(keys) < B.MIN_ROUNDS:
        return value, math.nan, math.nan
    procs = sorted({p for p, _ in keys})
    counts = [sum(1 for k in keys if k[0] == p) for p in procs]
    rmax = max(counts)
    rng = np.random.default_rng(B.SEED)
    pchoice = rng.integers(0, len(procs), size=(resamples, len(procs)))
    u = rng.random((resamples, len(procs), rmax))
    stats = []
    for i in range(resamples):
        ks, bs = [], []
        for j, pi in enumerate(pchoice[i]):
            mine = [k for k in keys if k[0] == procs[pi]]
            for r in range(rmax):
                key = mine[int(u[i, j, r] * len(mine))]
                ks.append(kb[key])
                if paired:
                    bs.append(bb[key])
        km = float(np.median(ks))
        bm = float(np.median(bs)) if paired else math.nan
        stats.append(B.metric_value(metric, km, bm, flops=None, nbytes=nbytes, floor_us=None))
    low, high = np.percentile(stats, [2.5, 97.5])
    return value, float(low), float(high)


def random_sides(rng, nprocs, decimals, runner_layout=False):
    """Samples of two sides, rounds of uneven sizes; ``runner_layout``: stored round after round
    (as the runner writes them, which takes a faster path), else shuffled."""
    sides = []
    for _ in range(2):
        xs, rs, ps = [], [], []
        for p in range(nprocs):
            for r in range(int(rng.integers(2, 14))):
                for _ in range(int(rng.integers(1, 6))):
                    xs.append(float(np.round(100 + 3 * rng.standard_normal(), decimals)))
                    rs.append(r)
                    ps.append(p)
        perm = np.arange(len(xs)) if runner_layout else rng.permutation(len(xs))
        sides.append(B.Samples([xs[i] for i in perm], [rs[i] for i in perm], [ps[i] for i in perm]))
    return sides


@pytest.mark.parametrize("seed", range(6))
def test_batched_bootstrap_equals_the_plain_definition_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    requests, want = [], []
    for n in range(8):
        kernel, baseline = random_sides(rng, nprocs=1 + n % 3, decimals=n % 3, runner_layout=n % 2 == 0)
        for metric in ("speedup", "time_us", "gbps"):
            requests.append(B.Request(metric, kernel, baseline, nbytes=1e9))
            want.append(plain_ci(metric, kernel, baseline, resamples=200, nbytes=1e9))
    got = B.bootstrap_many(requests, resamples=200)
    assert got == want


def test_decide_many_equals_decide_one_by_one():
    rng = np.random.default_rng(2)
    evs = []
    for n in range(12):
        kernel, baseline = random_sides(rng, nprocs=1 + n % 2, decimals=2)
        evs.append(Evidence(metric=("speedup", "time_us")[n % 2], claimed_value=(1.0, 100.0)[n % 2],
                            tolerance=0.02, correctness_passed=True, kernel=kernel, baseline=baseline))
    assert decide_many(evs) == [decide(ev) for ev in evs]


def test_round_and_process_indices_must_be_sane():
    with pytest.raises(ValueError, match="indices"):
        B.round_medians(B.Samples([1.0, 2.0], [0, -1], [0, 0]))
    with pytest.raises(ValueError, match="length"):
        B.round_medians(B.Samples([1.0, 2.0], [0], [0, 0]))


def wide_sides(rng, nprocs, rounds):
    sides = []
    for _ in range(2):
        xs, rs, ps = [], [], []
        for p in range(nprocs):
            for r in range(rounds):
                for _ in range(1 + (r % 2)):
                    xs.append(float(100 + rng.standard_normal()))
                    rs.append(r)
                    ps.append(p)
        sides.append(B.Samples(xs, rs, ps))
    return sides


@pytest.mark.parametrize("nprocs, rounds, resamples", [(1, 600, 60), (2, 530, 61), (3, 40, 50)])
def test_wide_and_sliced_bootstraps_equal_the_plain_definition(monkeypatch, nprocs, rounds, resamples):
    """Many rounds take the running-sum path, and (here forced by small budgets) slices of
    resamples: the same numbers as the definition, bit for bit."""
    monkeypatch.setattr(B, "_TALLY_CACHE_BYTES", 1000)
    monkeypatch.setattr(B, "_SLICE_BYTES", 20000)
    monkeypatch.setattr(B, "_WIDE", 30)
    monkeypatch.setattr(B, "_TALLIES", {})
    kernel, baseline = wide_sides(np.random.default_rng(rounds), nprocs, rounds)
    for metric in ("speedup", "time_us"):
        got = B.bootstrap_many([B.Request(metric, kernel, baseline)], resamples=resamples)[0]
        assert got == plain_ci(metric, kernel, baseline, resamples=resamples)


def test_memory_is_linear_in_rounds():
    """16,000 rounds once took 4.4 GB (a rounds² table); now a few tens of MB."""
    import tracemalloc

    rng = np.random.default_rng(3)
    n = 16_000
    kernel = B.Samples((100 + rng.standard_normal(n)).tolist(), list(range(n)), [0] * n)
    baseline = B.Samples((150 + rng.standard_normal(n)).tolist(), list(range(n)), [0] * n)
    tracemalloc.start()
    try:
        value, low, high = B.bootstrap_ci("speedup", kernel, baseline)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert low < value < high and abs(value - 1.5) < 0.01
    assert peak < 200 << 20, f"peak {peak >> 20} MiB"


def alike_sides(rng, rounds, per_round=5, decimals=1):
    """Two sides as the runner writes a one-process speedup: the same rounds, stored in order."""
    sides = []
    for _ in range(2):
        xs = [float(np.round(100 + 3 * rng.standard_normal(), decimals)) for _ in range(rounds * per_round)]
        sides.append(B.Samples(xs, [r for r in range(rounds) for _ in range(per_round)], [0] * (rounds * per_round)))
    return sides


def test_speedups_of_alike_sides_are_computed_as_arrays_with_the_general_paths_numbers(monkeypatch):
    """`_alike` (nearly every record audit reads) against the plain definition and against the
    general path, hints or not, with widths odd and even and a round whose median is NaN."""
    rng = np.random.default_rng(11)
    requests = [B.Request("speedup", *alike_sides(rng, rounds)) for rounds in (10, 12, 12, 13, 12, 11)]
    kernel, baseline = alike_sides(rng, 12)
    requests.append(B.Request("speedup", B.Samples([math.nan] * 5 + kernel.samples_us[5:], kernel.rounds,
                                                   kernel.processes), baseline))
    requests.append(B.Request("speedup", *random_sides(rng, nprocs=2, decimals=1)))  # rounds unlike: general
    three = [alike_sides(rng, rounds) for rounds in (9, 7, 9)]  # three processes, as --repeat 3 on a CPU
    requests.append(B.Request("speedup", *(B.Samples(sum((list(s[j].samples_us) for s in three), []),
                                                     sum((list(s[j].rounds) for s in three), []),
                                                     [p for p, s in enumerate(three) for _ in s[j].samples_us])
                                           for j in (0, 1))))
    for metric in ("time_us", "tflops", "gbps", "sol_fraction"):
        requests.append(B.Request(metric, *alike_sides(rng, 12), flops=3e9, nbytes=2e8, floor_us=40.0))
    fast = B.bootstrap_many(requests, resamples=300)
    assert fast[:6] == [plain_ci("speedup", rq.kernel, rq.baseline, resamples=300) for rq in requests[:6]]
    assert fast[-2] == plain_ci("gbps", requests[-2].kernel, requests[-2].baseline, resamples=300, nbytes=2e8)
    assert fast[8] == plain_ci("speedup", requests[8].kernel, requests[8].baseline, resamples=300)
    hinted = B.bootstrap_many(requests, resamples=300, hints=[(lo, hi) for _, lo, hi in fast])
    seen = []
    real = B._alike
    monkeypatch.setattr(B, "_alike", lambda rqs, *a, **k: seen.append(real(rqs, *a, **k)) or list(range(len(rqs))))
    general = B.bootstrap_many(requests, resamples=300)
    assert seen == [[6, 7]]  # the NaN and the request of two processes went the general way
    same = [a == b or (math.isnan(a[0]) and math.isnan(b[0])) for a, b in zip(fast, general)]
    assert all(same) and [a == b or math.isnan(a[0]) for a, b in zip(fast, hinted)] == [True] * len(fast)


def lopsided(big, ones):
    """One process of ``big`` rounds beside ``ones`` processes of one round each, both sides alike."""
    rounds = list(range(big)) + [0] * ones
    procs = [0] * big + list(range(1, ones + 1))
    return B.Samples([100.0 + (i % 7) for i in range(len(rounds))], rounds, procs)


def test_a_lopsided_process_layout_is_refused_before_anything_is_drawn():
    """An adversarial review: 1,500 processes of one round beside one of 1,500 (3,000 samples a side)
    drew 2.25 million rounds a resample, and one audit of that record took 33 s (at 50,000 of each,
    18.6 GiB asked for). Each resample draws max(rounds) from every process, so such a layout is
    refused by its shape; the skew a run can have (a process that lost rounds) is not."""
    side = lopsided(300, 299)
    for metric in ("speedup", "time_us"):
        with pytest.raises(ValueError, match="a resample would draw 90000 rounds from 599"):
            B.bootstrap_many([B.Request(metric, side, side)])
    many = B.Samples([1.0] * 1025, [0] * 1025, list(range(1025)))
    with pytest.raises(ValueError, match="1025 processes"):
        B.bootstrap_many([B.Request("speedup", many, many)])
    shortened = lopsided(40, 7)  # one process of 40 rounds and seven that lost all but one
    value, low, high = B.bootstrap_many([B.Request("speedup", shortened, shortened)])[0]
    assert value == 1.0 and low == high == 1.0


def test_a_zero_median_gives_the_same_infinite_value_on_both_paths(monkeypatch):
    """The array path divided numpy floats (inf) and the general one Python floats (ZeroDivisionError,
    an adversarial review): a timer too coarse for a GPU call can read 0.0, and a verdict then says
    the value is not finite on either path."""
    zero = B.Samples([0.0] * 12, list(range(12)), [0] * 12)
    one = B.Samples([1.0] * 12, list(range(12)), [0] * 12)
    requests = [B.Request("speedup", zero, one), B.Request("time_us", zero, one), B.Request("gbps", zero, one, nbytes=1e6)]
    fast = B.bootstrap_many(requests, resamples=50)
    monkeypatch.setattr(B, "_alike", lambda rqs, *a, **k: list(range(len(rqs))))
    general = B.bootstrap_many(requests, resamples=50)
    assert [v for v, _, _ in fast] == [v for v, _, _ in general] == [math.inf, 0.0, math.inf]
