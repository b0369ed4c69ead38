"""When to stop taking rounds: the two stopping criteria `orchestrator.protocol.measure_pair` takes, one per claim.

`RseStop`, nvbench's rule, stops once each side's median is known to a relative standard error; it
is the default for a claim with no rule of its own. `PrecisionStop` stops once the claim's own CI
is narrow enough to publish (issue 13).

nvbench stops a benchmark when its noise estimate is low enough; a claim's noise that matters is
the CI of its metric (a speedup's, not each side's median's), so the rounds go on until
`precision.precision_reached` says the half-width is inside the bound the verdict will apply, or
until the time cap. The check costs milliseconds, so it runs after every round while rounds are
few and after every tenth more beyond that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional


def quantile(xs: list[float], q: float) -> float:
    """Linear-interpolated quantile of sorted or unsorted data (numpy's default method)."""
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def rse_of_median(xs: list[float]) -> Optional[float]:
    """Standard error of the median relative to it: sqrt(pi/2) * sd / sqrt(n) / median."""
    n = len(xs)
    if n < 2:
        return None
    med = quantile(xs, 0.5)
    if med <= 0:
        return None
    mean = sum(xs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (n - 1))
    return 1.2533 * sd / math.sqrt(n) / med


@dataclass(frozen=True)
class RseStop:
    """Stop once every side's median has a relative standard error under ``target_rse``."""

    target_rse: float

    def __call__(self, acc: Mapping[str, Any]) -> Optional[str]:
        rses = [rse_of_median(a.kept) for a in acc.values()]
        known = [r for r in rses if r is not None]
        if known and len(known) == len(rses) and all(r < self.target_rse for r in known):
            return f"rse {max(known) * 100:.2f}% < {self.target_rse * 100:g}%"
        return None


@dataclass
class PrecisionStop:
    """Stop once the claim's metric has a CI half-width within 90% of the bound its verdict applies."""

    metric: str
    device: str
    max_ci_halfwidth: Optional[float] = None
    flops: Optional[float] = None
    nbytes: Optional[float] = None
    floor_us: Optional[float] = None
    next_at: int = 3
    last_fraction: Optional[float] = field(default=None)

    def __call__(self, acc: dict) -> Optional[str]:
        from claimbench.stats.precision import max_halfwidth, precision_reached
        from claimbench.stats.resample import Samples

        k, b = acc["kernel"], acc["baseline"]
        rounds = len(set(k.rounds))
        if rounds < self.next_at:
            return None
        self.next_at = rounds + 1 if rounds < 50 else int(rounds * 1.1) + 1
        ks = Samples(tuple(k.kept), tuple(k.rounds), (0,) * len(k.kept))
        bs = Samples(tuple(b.kept), tuple(b.rounds), (0,) * len(b.kept))
        try:
            ok, frac = precision_reached(ks, bs if self.metric == "speedup" else None, self.metric, device=self.device,
                                         max_ci_halfwidth=self.max_ci_halfwidth, flops=self.flops, nbytes=self.nbytes,
                                         floor_us=self.floor_us)
        except (ZeroDivisionError, ValueError, OverflowError):  # no value yet: keep taking rounds
            return None
        self.last_fraction = frac
        if ok:
            limit = max_halfwidth(self.device, self.max_ci_halfwidth)
            return f"precision: CI half-width {frac:.2%} within 90% of {limit:.1%} after {rounds} rounds"
        return None
