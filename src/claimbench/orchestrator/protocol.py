"""Stage 5: the measurement protocol. No judgement and no correctness: only time.

The protocol follows nvbench and the CUTLASS guidelines (docs/pitfalls.md, 'Timing'):
the first call of each side is never timed; warm-up runs by time, not by count, because clocks
take seconds to settle; kernel and baseline alternate in ABBA rounds so drift hits both; samples
taken under real throttling are dropped and counted, never averaged in; stopping is adaptive on
the relative standard error of the median. Devices hide behind a `Timer`, so the protocol is
unit-tested on CPU with a fake timer. CUDA timing lives in timing_cuda.py.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Protocol, TypeVar

from claimbench.machine.hardware import is_throttled
from claimbench.stats.stopping import RseStop, quantile, rse_of_median

# Bound when this module is imported, which the worker does before importing any kernel module:
# a kernel that later patches time.perf_counter_ns cannot change what the harness reads.
_NOW = time.perf_counter_ns
_MONOTONIC = time.monotonic

SIDES = ("kernel", "baseline")


@dataclass(frozen=True)
class TimingConfig:
    """The protocol's settings, with GPU defaults (`for_device` gives CPU's); recorded whole as PairTiming.config."""

    warmup_s: float = 1.0            # GPU default; CPU default 0.2 (see for_device)
    min_samples: int = 10            # kept samples per side before the rse rule may stop
    max_samples: int = 2000          # taken samples per side (kept + dropped)
    target_rse: float = 0.005        # relative standard error of the median
    max_time_s: float = 10.0         # cap on the timed rounds (warm-up not included)
    calls_per_round: int = 5         # samples of one side per round
    cold: bool = True                # CUDA: flush L2 before every sample
    hot: bool = False                # CUDA: back-to-back calls, no flush; a separately labelled number
    flush_bytes: Optional[int] = None  # CUDA: flush buffer size; at least 2x L2 is enforced
    min_block_us: float = 1000.0     # CPU: grow a block of calls until it takes this long
    min_sm_clock_mhz: Optional[float] = None  # CUDA: a sample whose SM clock read lower is dropped (nvbench: 75%)
    rewarm_s: float = 0.0            # untimed calls after each round's set-up (CUDA 0.05 s: the GPU idled through its checks)

    @classmethod
    def for_device(cls, device: str, **overrides: Any) -> "TimingConfig":
        """Defaults for ``device`` (CPU: 0.2 s warm-up, no L2 flush, 50 us blocks; GPU: 0.05 s re-warm per round),
        then ``overrides``, the run's own timing settings."""
        # CPU: 50 us blocks keep timer overhead (~0.1 us) under 0.5% while timing each call of
        # 50 us or more on its own, so every timed output is poisoned before the next call.
        base = {"warmup_s": 0.2, "cold": False, "min_block_us": 50.0} if device == "cpu" else {"rewarm_s": 0.05}
        return cls(**{**base, **overrides})


@dataclass(frozen=True)
class Sample:
    """One timed sample as a timer reports it. `out` is handed to hooks, then dropped."""

    us: float                                  # per call
    out: Any = None
    throttle_reasons: Optional[int] = None     # NVML bitmask read around the sample
    sm_clock_mhz: Optional[float] = None
    calls: int = 1


# What a timer calls for a side: a function in-process, a side's name for the orchestrator's RemoteTimer.
_Fn = TypeVar("_Fn")
_Fn_contra = TypeVar("_Fn_contra", contravariant=True)


class Timer(Protocol[_Fn_contra]):
    """What measure_pair times with: CpuTimer in-process, CudaEventTimer inside a CUDA side, and the
    orchestrator's RemoteTimer (orchestrator/timed.py), whose `fn` is a side's name rather than a function."""

    name: str                      # "cuda-event" | "perf_counter_ns"
    mode: str                      # "cold" | "hot" | "cpu"
    flush_bytes: Optional[int]
    l2_reset: Optional[bool]
    calls_per_block: dict[str, int]

    def call(self, fn: _Fn_contra) -> Any:
        """An untimed call, returned once complete: CpuTimer just calls, CudaEventTimer synchronizes the
        device after, RemoteTimer makes one exchange with the side and returns its reply."""

    def calibrate(self, side: str, fn: _Fn_contra) -> int:
        """Sets calls_per_block[side] and returns the calls made: CpuTimer doubles a block to min_block_us,
        CudaEventTimer keeps 1 when cold and grows a hot block, RemoteTimer first times null calls."""

    def sample(self, side: str, fn: _Fn_contra) -> Sample:
        """One timed block, per call: CpuTimer's perf_counter_ns, CudaEventTimer's events after an L2 flush
        (cold), RemoteTimer's exchange with the side, bracketed by the orchestrator's clock."""


class CpuTimer:
    """perf_counter_ns around a block of n calls; n doubles until a block takes >= min_block_us,
    so the ~100 ns timer overhead is negligible (torch.utils.benchmark's blocked_autorange idea)."""

    name = "perf_counter_ns"
    mode = "cpu"
    flush_bytes = None
    l2_reset = None

    def __init__(self, min_block_us: float = 1000.0, max_calls: int = 1 << 20) -> None:
        self.min_block_ns = min_block_us * 1000.0
        self.max_calls = max_calls
        self.calls_per_block: dict[str, int] = {}

    def call(self, fn: Callable[[], Any]) -> Any:
        """A CPU call is complete when it returns: nothing to wait for."""
        return fn()

    def _block_ns(self, fn: Callable[[], Any], n: int) -> tuple[int, Any]:
        out = None
        t0 = _NOW()
        for _ in range(n):
            out = fn()
        return _NOW() - t0, out

    def calibrate(self, side: str, fn: Callable[[], Any]) -> int:
        """Doubles a block from one call until it lasts min_block_us (or reaches max_calls) and keeps that
        size for ``side``; returns every call made, all of them warm-up."""
        n, made = 1, 0
        while True:
            ns, _ = self._block_ns(fn, n)
            made += n
            if ns >= self.min_block_ns or n >= self.max_calls:
                break
            n *= 2
        self.calls_per_block[side] = n
        return made

    def sample(self, side: str, fn: Callable[[], Any]) -> Sample:
        """One block of the calibrated size under perf_counter_ns; `us` is per call, `out` the last call's."""
        n = self.calls_per_block.get(side, 1)
        ns, out = self._block_ns(fn, n)
        return Sample(us=ns / n / 1000.0, out=out, calls=n)


@dataclass(frozen=True)
class SideSamples:
    """One side's timed rounds as the protocol kept them, in this process; the record's `SideTiming`
    (store/record.py) is what of them is written down, combined over the `--repeat` processes."""

    samples_us: tuple[float, ...]      # kept, in the order taken
    rounds: tuple[int, ...]            # round index of each kept sample
    dropped_us: tuple[float, ...]      # samples dropped as throttled
    dropped_rounds: tuple[int, ...]
    dropped_throttled: int
    median_us: Optional[float]         # None when nothing was kept, never NaN
    iqr_us: Optional[float]
    rse: Optional[float]               # relative standard error of the median
    clocks_mhz: Optional[dict[str, float]]  # min / median / max SM clock over kept samples
    throttle_reasons_seen: int         # OR of every bitmask read
    calls_per_block: int
    throttled_majority: bool
    dropped_slow_clock: int = 0        # of the dropped: the SM clock read below min_sm_clock_mhz


@dataclass(frozen=True)
class PairTiming:
    """All measure_pair found for one kernel/baseline pair, with the timer and settings it ran under;
    orchestrate stores it as the claim's `timing`."""

    kernel: SideSamples
    baseline: SideSamples
    warmup_s: float
    warmup_calls: int
    stop_reason: str
    mode: str                          # "cold" | "hot" | "cpu"
    timer: str                         # "cuda-event" | "perf_counter_ns"
    flush_bytes: Optional[int]
    l2_reset: Optional[bool]
    calls_per_block: Optional[dict[str, int]]
    n_rounds: int
    elapsed_s: float
    throttled_majority: bool           # more than half of a side's samples were throttled
    config: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain data (dataclasses.asdict), as the run's JSON carries it."""
        return asdict(self)


class _Side:
    def __init__(self, min_clock_mhz: Optional[float] = None) -> None:
        self.min_clock_mhz = min_clock_mhz
        self.slow = 0
        self.kept: list[float] = []
        self.rounds: list[int] = []
        self.dropped: list[float] = []
        self.dropped_rounds: list[int] = []
        self.clocks: list[float] = []
        self.reasons = 0

    def add(self, s: Sample, r: int) -> None:
        self.reasons |= int(s.throttle_reasons or 0)
        slow = self.min_clock_mhz is not None and s.sm_clock_mhz is not None and s.sm_clock_mhz < self.min_clock_mhz
        if is_throttled(s.throttle_reasons) or slow:
            # NVML's reason bits miss a GPU whose clocks sagged while idle between rounds (345 MHz was
            # recorded): a sample below 75% of the clock is dropped as nvbench drops it, and counted
            self.slow += int(slow)
            self.dropped.append(s.us)
            self.dropped_rounds.append(r)
            return
        self.kept.append(s.us)
        self.rounds.append(r)
        if s.sm_clock_mhz is not None:
            self.clocks.append(float(s.sm_clock_mhz))

    @property
    def taken(self) -> int:
        return len(self.kept) + len(self.dropped)

    def freeze(self, calls_per_block: int) -> SideSamples:
        k = self.kept
        clocks = ({"min": min(self.clocks), "median": quantile(self.clocks, 0.5), "max": max(self.clocks)}
                  if self.clocks else None)
        return SideSamples(
            samples_us=tuple(k), rounds=tuple(self.rounds), dropped_us=tuple(self.dropped),
            dropped_rounds=tuple(self.dropped_rounds), dropped_throttled=len(self.dropped),
            median_us=quantile(k, 0.5) if k else None,
            iqr_us=quantile(k, 0.75) - quantile(k, 0.25) if k else None,
            rse=rse_of_median(k), clocks_mhz=clocks, throttle_reasons_seen=self.reasons,
            calls_per_block=calls_per_block, throttled_majority=len(self.dropped) * 2 > self.taken,
            dropped_slow_clock=self.slow)


def _stop_reason(acc: dict[str, _Side], cfg: TimingConfig, elapsed_s: float,
                 *, enough: Optional[Callable[[dict[str, "_Side"]], Optional[str]]] = None) -> Optional[str]:
    if all(len(a.kept) >= cfg.min_samples for a in acc.values()):
        # the claim's own criterion (the CI of its metric) when it has one, else each median's rse
        why = (enough or RseStop(cfg.target_rse))(acc)
        if why:
            return why
    if any(a.taken >= cfg.max_samples for a in acc.values()):
        return "max samples"
    if elapsed_s >= cfg.max_time_s:
        return f"time cap {cfg.max_time_s:g} s"
    return None


def measure_pair(kernel: _Fn, baseline: _Fn, timer: Timer[_Fn],
                 *, config: TimingConfig, hooks: Any = None,
                 progress: Optional[Callable[[str, str], None]] = None,
                 clock: Callable[[], float] = _MONOTONIC,
                 enough: Optional[Callable[[dict[str, "_Side"]], Optional[str]]] = None) -> PairTiming:
    """Time kernel against baseline in paired, interleaved rounds.

    hooks (optional methods): before_round(r) before each timed round (the worker rewrites
    input contents there); before_sample(side, r) before each sample, ahead of the L2 flush;
    after_sample(side, r, out) with the sample's output after the timed region. No reference
    to an output is kept here once the hook returns. ``enough(acc)``, when given, replaces the
    relative-standard-error rule: a reason to stop (the claim's CI is narrow enough) or None.
    """
    fns = {"kernel": kernel, "baseline": baseline}
    say = progress or (lambda phase, detail: None)
    before_round = getattr(hooks, "before_round", None)
    before_sample = getattr(hooks, "before_sample", None)
    after_sample = getattr(hooks, "after_sample", None)

    say("warm-up", "first calls")
    warm_calls = 0
    for side in SIDES:  # the first call compiles, autotunes and allocates: never timed
        timer.call(fns[side])
        warm_calls += 1
    t0 = clock()
    for side in SIDES:
        warm_calls += timer.calibrate(side, fns[side])
    i = 0
    while i < 2 or clock() - t0 < config.warmup_s:
        s = timer.sample(SIDES[i % 2], fns[SIDES[i % 2]])
        warm_calls += s.calls
        del s
        i += 1
    warmup_s = clock() - t0
    say("warm-up", f"done: {warmup_s:.1f} s, {warm_calls} calls")

    acc = {side: _Side(config.min_sm_clock_mhz) for side in SIDES}
    t1 = clock()
    r, reason = 0, None
    while reason is None:
        if before_round is not None:
            before_round(r)
        if r and config.rewarm_s > 0:  # the round's set-up kept the GPU idle for seconds: clocks fall
            tw, j = clock(), 0
            while j < 2 or clock() - tw < config.rewarm_s:
                timer.call(fns[SIDES[j % 2]])
                j += 1
        for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
            for _ in range(config.calls_per_round):
                if before_sample is not None:
                    before_sample(side, r)
                s = timer.sample(side, fns[side])
                acc[side].add(s, r)
                out = s.out
                del s
                if after_sample is not None:
                    after_sample(side, r, out)
                del out
        r += 1
        say("timing", f"round {r} ({acc['kernel'].taken + acc['baseline'].taken} samples)")
        reason = _stop_reason(acc, config, clock() - t1, enough=enough)

    cpb = {side: timer.calls_per_block.get(side, 1) for side in SIDES}
    k, b = acc["kernel"].freeze(cpb["kernel"]), acc["baseline"].freeze(cpb["baseline"])
    return PairTiming(
        kernel=k, baseline=b, warmup_s=warmup_s, warmup_calls=warm_calls, stop_reason=reason,
        mode=timer.mode, timer=timer.name, flush_bytes=timer.flush_bytes, l2_reset=timer.l2_reset,
        calls_per_block=cpb if timer.mode in ("cpu", "hot") else None, n_rounds=r,
        elapsed_s=clock() - t1, throttled_majority=k.throttled_majority or b.throttled_majority,
        config=asdict(config))
