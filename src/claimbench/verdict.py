"""Decide: a pure function from evidence to a verdict, so ``audit`` can recompute it from a record.

The measured value comes from paired, interleaved rounds; its 95% CI from a bootstrap that
resamples processes (``--repeat``) and then rounds within them, so drift and run-to-run variance
widen the interval instead of hiding in it. The bootstrap seed is fixed: the same samples always
give the same CI, which is what makes a hand-edited record detectable.
"""

from __future__ import annotations

import math
from functools import lru_cache
from dataclasses import asdict, dataclass, field
from typing import Optional, Sequence

import numpy as np

from .status import Status

HIGHER_IS_BETTER = {"speedup": True, "tflops": True, "gbps": True, "sol_fraction": True, "time_us": False}
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20240601
FLOOR_MARGIN = 0.9
MIN_ROUNDS = 3  # fewer timed rounds give no interval, so no verdict from timing


@dataclass(frozen=True)
class Samples:
    """Kept timing samples of one side, each tagged with its process and round."""

    samples_us: Sequence[float]
    rounds: Sequence[int]
    processes: Sequence[int]


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


def metric_value(metric: str, kmed: float, bmed: float, flops, nbytes, floor_us) -> float:
    """One metric from the two medians (microseconds)."""
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


def bootstrap_ci(metric: str, kernel: Samples, baseline: Samples, *, flops=None, nbytes=None,
                 floor_us=None, resamples: int = BOOTSTRAP_RESAMPLES) -> tuple[float, float, float]:
    """(value, low, high): the point estimate and a 95% percentile CI, from the same statistic.

    Rounds are the blocks: each round's median is one observation, rounds are resampled within
    resampled processes, and kernel and baseline rounds stay paired so shared drift cancels.
    Vectorized, because ``audit`` recomputes it for every published record.
    """
    paired = metric == "speedup"
    kb = _round_medians(kernel)
    bb = _round_medians(baseline) if paired else {}
    keys = sorted(set(kb) & set(bb)) if paired else sorted(kb)
    # the point estimate is the bootstrap's own statistic on the data: medians of round medians
    kmed = _median([kb[key] for key in keys]) if keys else math.nan
    bmed = _median([bb[key] for key in keys]) if paired and keys else math.nan
    value = metric_value(metric, kmed, bmed, flops, nbytes, floor_us)
    if len(keys) < MIN_ROUNDS:
        return value, math.nan, math.nan
    procs = sorted({p for p, _ in keys})
    rmax = max(sum(1 for key in keys if key[0] == p) for p in procs)
    K = np.full((len(procs), rmax), np.nan)
    B = np.full((len(procs), rmax), np.nan)
    counts = np.zeros(len(procs), dtype=int)
    for key in keys:
        pi = procs.index(key[0])
        K[pi, counts[pi]] = kb[key]
        if paired:
            B[pi, counts[pi]] = bb[key]
        counts[pi] += 1
    pchoice, ridx = _resample_indices(len(procs), tuple(int(c) for c in counts), rmax, resamples)
    km = _row_medians(K[pchoice, ridx].reshape(resamples, -1))
    bm = _row_medians(B[pchoice, ridx].reshape(resamples, -1)) if paired else np.full(resamples, np.nan)
    stats = _metric_vec(metric, km, bm, flops, nbytes, floor_us)
    low, high = np.percentile(stats, [2.5, 97.5])
    return value, float(low), float(high)


@lru_cache(maxsize=256)
def _resample_indices(nprocs: int, counts: tuple, rmax: int, resamples: int):
    """The bootstrap's draws depend only on the shape of the data and the fixed seed, so records
    of the same shape share them (audit recomputes thousands)."""
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    pchoice = rng.integers(0, nprocs, size=(resamples, nprocs))
    u = rng.random((resamples, nprocs, rmax))
    ridx = (u * np.asarray(counts)[pchoice][:, :, None]).astype(int)
    return pchoice[:, :, None], ridx


def _metric_vec(metric, km, bm, flops, nbytes, floor_us):
    if metric == "speedup":
        return bm / km
    if metric == "time_us":
        return km
    if metric == "tflops":
        return (flops or 0.0) / km / 1e6
    if metric == "gbps":
        return (nbytes or 0.0) / km / 1e3
    return (floor_us or 0.0) / km


def _round_medians(side: Samples) -> dict[tuple[int, int], float]:
    groups: dict[tuple[int, int], list[float]] = {}
    for x, r, p in zip(side.samples_us, side.rounds, side.processes):
        groups.setdefault((int(p), int(r)), []).append(float(x))
    return {key: _median(v) for key, v in groups.items()}


def _median(values: list[float]) -> float:
    """Median of a short list; rounds hold a handful of samples, where numpy's call costs more."""
    v = sorted(values)
    m = len(v) // 2
    return v[m] if len(v) % 2 else (v[m - 1] + v[m]) / 2


def _row_medians(a: np.ndarray) -> np.ndarray:
    """Median of each row (rows are short: one resample of rounds); sort beats partition here."""
    a = np.sort(a, axis=1)
    m = a.shape[1] // 2
    return a[:, m] if a.shape[1] % 2 else (a[:, m - 1] + a[:, m]) / 2


def decide(ev: Evidence) -> Verdict:
    """The verdict, in order of precedence: execution, policy and guards, correctness, hardware, timing."""
    if ev.outcome in ("error", "timeout"):
        return Verdict(Status(ev.outcome), ev.outcome_reason or ev.outcome)
    if ev.rejections:
        return Verdict(Status.REJECTED, "; ".join(ev.rejections))
    if ev.correctness_passed is False:
        return Verdict(Status.INCORRECT, ev.correctness_reason or "output does not match the reference")
    if not ev.hardware_match:
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
    kmed = float(np.median(np.asarray(ev.kernel.samples_us, dtype=float)))
    if ev.floor_us is not None and ev.floor_us > 0 and kmed < FLOOR_MARGIN * ev.floor_us:
        return Verdict(Status.REJECTED, f"kernel median {kmed:.4g} us is below 0.9 x the physics floor {ev.floor_us:.4g} us ({ev.floor_term}): impossible, so a bug or a cheat")
    if ev.baseline is not None and ev.baseline.samples_us and ev.floor_us:
        bmed = float(np.median(np.asarray(ev.baseline.samples_us, dtype=float)))
        if bmed < FLOOR_MARGIN * ev.floor_us:
            return Verdict(Status.REJECTED, f"baseline median {bmed:.4g} us is below 0.9 x the physics floor {ev.floor_us:.4g} us: the declared flops or bytes are too high")
    base = ev.baseline or Samples((), (), ())
    value, low, high = bootstrap_ci(ev.metric, ev.kernel, base, flops=ev.flops, nbytes=ev.bytes, floor_us=ev.floor_us)
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
    v = dict(value=value, ci_low=low, ci_high=high)
    if ev.throttled_majority:
        return Verdict(Status.INCONCLUSIVE, f"most samples were dropped for throttling; {shown}", **v)
    if ok and ev.blockers:
        return Verdict(Status.INCONCLUSIVE, f"would verify, but {'; '.join(ev.blockers)} blocks verified; {shown}", **v)
    if ok:
        return Verdict(Status.VERIFIED, shown, published_value=value, **v)
    if bad:
        return Verdict(Status.REFUTED, shown, **v)
    return Verdict(Status.INCONCLUSIVE, f"the CI straddles the threshold; {shown}", **v)
