"""When to stop taking rounds: once the claim's own CI is narrow enough to publish (issue 13).

nvbench stops a benchmark when its noise estimate is low enough; a claim's noise that matters is
the CI of its metric (a speedup's, not each side's median's), so the rounds go on until
`precision.precision_reached` says the half-width is inside the bound the verdict will apply, or
until the time cap. The check costs milliseconds, so it runs after every round while rounds are
few and after every tenth more beyond that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass
class PrecisionStop:
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
