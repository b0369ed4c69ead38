"""`percentile.ci95` gives numpy's percentiles bit for bit, with or without a hint, whatever the hint says."""

import math

import numpy as np
import pytest

from claimbench.stats.percentile import ci95


def test_percentiles_match_numpy():
    rng = np.random.default_rng(1)
    stats = rng.standard_normal((20, 2000)) * 50
    stats[3, 7] = np.inf
    stats[4, 9] = np.nan
    for row, (low, high) in zip(stats, ci95(stats)):
        want = np.percentile(row, [2.5, 97.5])
        assert (low, high) == (float(want[0]), float(want[1])) or (math.isnan(low) and np.isnan(row).any())


def test_percentiles_of_non_negative_rows_match_numpy_bit_for_bit():
    """The integer partition (`ci95` on rows without a sign bit) finds numpy's numbers: ties, zeros,
    +inf, subnormals and a NaN among them."""
    rng = np.random.default_rng(3)
    stats = np.abs(rng.standard_normal((24, 2000))) * 10.0 ** rng.integers(-300, 300, size=(24, 1))
    stats[0] = np.round(stats[0], 1)  # many ties
    stats[1, :100] = 0.0
    stats[2, 5] = np.inf
    stats[3, ::7] = 5e-324
    stats[4, 9] = np.nan
    stats[5] = 1.0
    assert not np.signbit(stats).any()
    for row, (low, high) in zip(stats, ci95(stats)):
        want = np.percentile(row, [2.5, 97.5])
        if np.isnan(row).any():
            assert math.isnan(low) and math.isnan(high)
        else:
            assert (low, high) == (float(want[0]), float(want[1]))


def _hints_of(base, rng):
    """Hints an honest record, a careless editor and a forger could give: the exact interval, one
    ulp either way, a relative nudge, the bounds swapped, another row's, none, zero, infinity."""
    h = np.array(base)
    return [h, np.nextafter(h, np.inf), np.nextafter(h, -np.inf), h * (1 + 1e-12), h[:, ::-1].copy(),
            rng.permutation(h.ravel()).reshape(h.shape), np.full_like(h, np.nan), h * 0, np.full_like(h, np.inf),
            -h]


@pytest.mark.parametrize("seed", range(4))
def test_a_hint_never_changes_the_percentiles(seed):
    """The counting path (a record's own interval as the pivot) finds the order statistics the
    partition finds, through ties, a NaN, and any hint: exact, nudged, wrong or missing."""
    rng = np.random.default_rng(seed)
    stats = rng.lognormal(0, 0.05, size=(60, 2000))
    stats[:20] = np.round(stats[:20], 2)  # ties at the order statistics
    stats[20:30, :80] = stats[20:30, :1]  # the lowest 80 equal: both low statistics tie the pivot
    stats[30, 3] = np.nan
    stats[31] = 1.0
    base = ci95(stats)
    for row, (low, high) in zip(stats, base):
        want = np.percentile(row, [2.5, 97.5])
        assert (low, high) == (float(want[0]), float(want[1])) or (math.isnan(low) and np.isnan(row).any())
    for hints in _hints_of(base, rng):
        got = ci95(stats, hints)
        assert all(a == b or (math.isnan(a[0]) and math.isnan(b[0])) for a, b in zip(got, base))


def test_an_honest_hint_is_counted_not_partitioned(monkeypatch):
    """With the interval the rows really have, no row is partitioned: the speed the hint is for."""
    from claimbench.stats import percentile

    rng = np.random.default_rng(7)
    stats = np.round(rng.lognormal(0, 0.05, size=(30, 2000)), 3)
    base = np.array(ci95(stats))
    seen = []
    real = percentile._partitioned
    monkeypatch.setattr(percentile, "_partitioned", lambda s, *a, **k: seen.append(len(s)) or real(s, *a, **k))
    assert ci95(stats, base) == [tuple(r) for r in base.tolist()]
    assert seen == []
    ci95(stats, base * 1.01)  # a wrong interval: those rows are partitioned
    assert seen and seen[0] > 0
