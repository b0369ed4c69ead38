"""The stopping criteria: each median's rse (the default) and the claim's own CI."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from claimbench.stats.stopping import RseStop, quantile, rse_of_median


@dataclass
class _Side:
    kept: list


def test_rse_of_median():
    assert rse_of_median([1.0]) is None
    assert rse_of_median([2.0] * 5) == 0.0
    xs = [1.0, 2.0, 3.0, 4.0]
    sd = (sum((x - 2.5) ** 2 for x in xs) / 3) ** 0.5
    assert rse_of_median(xs) == pytest.approx(1.2533 * sd / 2 / 2.5)


def test_quantile_interpolates_as_numpy_does():
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.5
    assert quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.25) == 2.0


def test_rse_stop_needs_every_side_under_the_target():
    tight, loose = _Side([100.0, 100.1, 99.9] * 10), _Side([50.0, 150.0, 100.0] * 10)
    assert RseStop(0.005)({"kernel": tight, "baseline": tight}).startswith("rse ")
    assert RseStop(0.005)({"kernel": tight, "baseline": loose}) is None
    assert RseStop(0.005)({"kernel": tight, "baseline": _Side([1.0])}) is None  # one sample: no rse yet
