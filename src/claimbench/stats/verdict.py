"""Decide: a pure function from evidence to a verdict, so ``audit`` can recompute it from a record.

The measured value comes from paired, interleaved rounds; its 95% CI from a bootstrap that
resamples processes (``--repeat``) and then rounds within them, so drift and run-to-run variance
widen the interval instead of hiding in it. The bootstrap seed is fixed: the same samples always
give the same CI, which is what makes a hand-edited record detectable.

From protocol 4 on, `verified` also needs a narrow CI and a quiet machine (``precision.py``);
older records keep the rules they were made under.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

from claimbench.stats import precision
from claimbench.stats.samples import MIN_ROUNDS, Request, Samples, median, metric_value
from claimbench.stats.status import Status

__all__ = ["Evidence", "Samples", "Verdict", "decide", "decide_many", "metric_value", "MIN_ROUNDS"]

HIGHER_IS_BETTER = {"speedup": True, "tflops": True, "gbps": True, "sol_fraction": True, "time_us": False}
FLOOR_MARGIN = 0.9


@dataclass(frozen=True)
class Evidence:
    """Everything a verdict depends on; all of it is stored in the record."""

    metric: str
    claimed_value: float
    tolerance: float
    flops: Optional[float] = None
    bytes: Optional[float] = None
    outcome: Optional[str] = None  # "error" | "timeout" from execution, with outcome_reason
    outcome_reason: str = ""
    rejections: Sequence[str] = ()
    correctness_passed: Optional[bool] = None
    correctness_reason: str = ""
    hardware_match: bool = True
    hardware_reason: str = ""
    blockers: Sequence[str] = ()
    kernel: Optional[Samples] = None
    baseline: Optional[Samples] = None
    floor_us: Optional[float] = None
    floor_term: str = ""
    throttled_majority: bool = False
    tensor_bytes: Optional[float] = None
    # the precision and load rules (precision.py) decide records of protocol_version >= 4 only
    protocol_version: Optional[int] = None
    device: str = ""                           # "cuda" | "cpu": which default CI bound applies
    max_ci_halfwidth: Optional[float] = None   # the claim's own bound; None: the device's default
    other_cpu_fraction: Optional[float] = None  # other processes' share of all cores during the timed rounds
    other_gpu_processes: Optional[int] = None   # other processes seen on the claim's GPUs during them


@dataclass(frozen=True)
class Verdict:
    status: Status
    reason: str
    value: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    published_value: Optional[float] = None
    details: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["status"] = self.status.value
        return d


def decide(ev: Evidence) -> Verdict:
    """The verdict, in order of precedence: execution, policy and guards, correctness, hardware, timing."""
    return decide_many([ev])[0]


def decide_many(evs: Sequence[Evidence], hints: Optional[Sequence[tuple[Optional[float], Optional[float]]]] = None) -> list[Verdict]:
    """``decide`` for each piece of evidence, with the bootstrap CIs computed together. ``hints``:
    the interval each is expected to give (a record's own, when audit checks it), which only makes
    finding it faster (`percentile.ci95`)."""
    from claimbench.stats.resample import bootstrap_many  # numpy: only where a verdict is computed

    out: list = [_before_timing(ev) for ev in evs]
    pending = [i for i, v in enumerate(out) if v is None]
    cis = bootstrap_many([_request(evs[i]) for i in pending], hints=[hints[i] for i in pending] if hints else None)
    for i, (value, low, high) in zip(pending, cis):
        out[i] = _from_timing(evs[i], value, low, high=high)
    return out


def _request(ev: Evidence) -> Request:
    assert ev.kernel is not None  # _before_timing decided every claim without kernel samples
    return Request(ev.metric, ev.kernel, ev.baseline or Samples((), (), ()), ev.flops, ev.bytes, ev.floor_us)


def _before_timing(ev: Evidence) -> Optional[Verdict]:
    """Every verdict that does not need a CI, or None when timing decides."""
    if ev.outcome in ("error", "timeout"):
        return Verdict(Status(ev.outcome), ev.outcome_reason or ev.outcome)
    if ev.rejections:
        return Verdict(Status.REJECTED, "; ".join(ev.rejections))
    if ev.correctness_passed is False:
        return Verdict(Status.INCORRECT, ev.correctness_reason or "output does not match the reference")
    if not ev.hardware_match:
        # a skip says the hardware did not match and the CPU check passed; a check that did not run
        # (or did not say it passed) is never a skip, or a broken CPU path would read as fine
        if ev.correctness_passed is not True:
            return Verdict(Status.ERROR, f"{ev.hardware_reason}; the CPU correctness check did not pass"
                           + (f": {ev.correctness_reason}" if ev.correctness_reason else " (it reported nothing)"))
        note = f"; {ev.correctness_reason}" if ev.correctness_reason else ""
        return Verdict(Status.SKIPPED, f"{ev.hardware_reason}{note}")
    if ev.correctness_passed is not True:
        return Verdict(Status.ERROR, "correctness was not established; no number without it")
    if ev.kernel is None or not ev.kernel.samples_us or (ev.metric == "speedup" and (ev.baseline is None or not ev.baseline.samples_us)):
        if ev.throttled_majority:
            return Verdict(Status.INCONCLUSIVE, "most samples were taken while the GPU throttled and were dropped")
        return Verdict(Status.ERROR, "no timing samples")
    if ev.tensor_bytes is not None and ev.bytes is not None and ev.bytes > ev.tensor_bytes * 1.0001:
        return Verdict(Status.REJECTED, f"declared bytes {ev.bytes:.4g} exceed the {ev.tensor_bytes:.4g} bytes of the actual input and output tensors")
    if ev.floor_us is not None and ev.floor_us > 0 and (kmed := median(ev.kernel.samples_us)) < FLOOR_MARGIN * ev.floor_us:
        return Verdict(Status.REJECTED, f"kernel median {kmed:.4g} us is below 0.9 x the physics floor {ev.floor_us:.4g} us ({ev.floor_term}): impossible, so a bug or a cheat")
    if ev.baseline is not None and ev.baseline.samples_us and ev.floor_us:
        bmed = median(ev.baseline.samples_us)
        if bmed < FLOOR_MARGIN * ev.floor_us:
            return Verdict(Status.REJECTED, f"baseline median {bmed:.4g} us is below 0.9 x the physics floor {ev.floor_us:.4g} us: the declared flops or bytes are too high")
    return None


def _from_timing(ev: Evidence, value: float, low: float, *, high: float) -> Verdict:
    if not math.isfinite(value):
        return Verdict(Status.INCONCLUSIVE, "the measured value is not finite", value=None)
    if not (math.isfinite(low) and math.isfinite(high)):
        return Verdict(Status.INCONCLUSIVE, f"fewer than {MIN_ROUNDS} timed rounds: no confidence interval "
                       f"({ev.metric} {value:.4g}); give the claim more time", value=value)
    up = HIGHER_IS_BETTER[ev.metric]
    threshold = ev.claimed_value * (1 - ev.tolerance) if up else ev.claimed_value * (1 + ev.tolerance)
    shown = f"{ev.metric} {value:.4g} [95% CI {low:.4g}, {high:.4g}] vs claimed {ev.claimed_value:g} (threshold {threshold:.4g})"
    ok = low >= threshold if up else high <= threshold
    bad = high < threshold if up else low > threshold
    v: dict[str, Any] = dict(value=value, ci_low=low, ci_high=high)
    if ev.throttled_majority:
        return Verdict(Status.INCONCLUSIVE, f"most samples were dropped for throttling; {shown}", **v)
    blockers = list(ev.blockers)
    if precision.applies(ev.protocol_version):
        busy = precision.busy_reason(ev.device, ev.other_cpu_fraction)
        if busy:  # a refutation drawn from the neighbours' work is no better than a verification
            return Verdict(Status.INCONCLUSIVE, f"{busy}; {shown}", **v)
        frac = precision.halfwidth_fraction(value, low, high)
        limit = precision.max_halfwidth(ev.device, ev.max_ci_halfwidth)
        shown += f" ±{frac:.1%}"
        sharing = precision.gpu_sharing_reason(ev.device, ev.other_gpu_processes)
        blockers += [sharing] if sharing else []
        if ok and not blockers and frac > limit:
            from claimbench.stats.settle import advice

            paired = ev.baseline if ev.metric == "speedup" else None
            hint = advice(ev.kernel, paired, limit, measured=frac) if ev.kernel else ""
            why = precision.too_wide_reason(frac, limit, ev.device, claimed=ev.max_ci_halfwidth, advice=hint)
            return Verdict(Status.INCONCLUSIVE, f"{why}; {shown}", **v)
        nprocs = len(set(ev.kernel.processes)) if ev.kernel is not None else 0
        few = precision.too_few_processes_reason(ev.protocol_version, ev.device, nprocs)
        if ok and not blockers and few:
            return Verdict(Status.INCONCLUSIVE, f"{few}; {shown}", **v)
    if ok and blockers:
        return Verdict(Status.INCONCLUSIVE, f"would verify, but {'; '.join(blockers)} blocks verified; {shown}", **v)
    if ok:
        return Verdict(Status.VERIFIED, shown, published_value=value, **v)
    if bad:
        return Verdict(Status.REFUTED, shown, **v)
    return Verdict(Status.INCONCLUSIVE, f"the CI straddles the threshold; {shown}", **v)
