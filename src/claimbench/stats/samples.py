"""The timing samples a verdict is computed from, and the arithmetic on them that needs no numpy.

Apart from `resample` (the bootstrap, which needs numpy) so that the commands that read records
without recomputing a verdict (a warm `audit`, `publish`, `table`, `show`) do not import numpy:
about 0.1 s of each such command's start.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Sequence

from claimbench.options import MAX_PROCESSES  # noqa: F401 (re-exported: the bootstrap's bound)

MIN_ROUNDS = 3  # fewer timed rounds give no interval, so no verdict from timing


@dataclass(frozen=True)
class Samples:
    """Kept timing samples of one side, each tagged with its process and round."""

    samples_us: Sequence[float]
    rounds: Sequence[int]
    processes: Sequence[int]


@dataclass(frozen=True)
class Request:
    """One CI to compute: a metric and the samples of both sides (baseline only for speedup)."""

    metric: str
    kernel: Samples
    baseline: Samples
    flops: Optional[float] = None
    nbytes: Optional[float] = None
    floor_us: Optional[float] = None


def metric_value(metric: str, kmed, bmed, *, flops, nbytes, floor_us):
    """One metric from the two medians in microseconds (floats or arrays of them)."""
    if metric == "speedup":
        return bmed / kmed
    if metric == "time_us":
        return kmed
    if metric == "tflops":
        return (flops or 0.0) / kmed / 1e6
    if metric == "gbps":
        return (nbytes or 0.0) / kmed / 1e3
    if metric == "sol_fraction":
        return (floor_us or 0.0) / kmed
    raise ValueError(f"unknown metric {metric}")


def median_of_sorted(v: list[float]) -> float:
    """Median of a short sorted list, the same number ``np.median`` gives."""
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2


def median(values: Sequence[float]) -> float:
    """``np.median`` of a short list without numpy's overhead (NaN when any value is NaN)."""
    v = sorted(values)
    total = sum(v)
    if total != total and any(x != x for x in v):
        return math.nan
    return float(median_of_sorted(v))
