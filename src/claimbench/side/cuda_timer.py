"""CUDA timing: cold-L2 samples with CUDA events, and the check for work on other streams.

Each cold sample, all outside the events: read NVML, write a flush buffer of at least 2x L2
(nvbench flushes by writing an L2-sized buffer; CUTLASS asks for 2x), reset persisting L2 lines
(a normal flush does not evict them: nvbench #458), then queue a short spin kernel so the start
event is recorded on a busy GPU rather than an idle one waiting for the host (nvbench's blocking
kernel). Then start event, the call, end event; synchronize after the end event, never inside.
torch is imported inside functions only: importing this module costs nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

from claimbench.orchestrator.protocol import Sample

_PERF = time.perf_counter_ns
SYNC_MARK = 3  # calls in a row that outlast their grown sleep before a side counts as one that syncs


def _l2_resetter() -> tuple[Optional[Callable[[], None]], str]:
    """cudaCtxResetPersistingL2Cache through cupy, else libcudart via ctypes; (None, why) if absent.

    torch exposes no such call. Any libcudart works: the runtime acts on the device's primary
    context, which torch uses too.
    """
    try:
        import cupy  # noqa: F401

        fn = getattr(cupy.cuda.runtime, "ctxResetPersistingL2Cache", None)
        if fn is not None:
            return fn, "cupy"
    except Exception:
        pass
    candidates = [ctypes.util.find_library("cudart")]
    for base in sys.path:
        candidates += sorted(glob.glob(os.path.join(base, "nvidia", "cuda_runtime", "lib", "libcudart.so*")))
        candidates += sorted(glob.glob(os.path.join(base, "nvidia", "cu*", "lib", "libcudart.so*")))
        candidates += sorted(glob.glob(os.path.join(base, "torch", "lib", "libcudart*.so*")))
    for path in filter(None, candidates):
        try:
            fn = ctypes.CDLL(path).cudaCtxResetPersistingL2Cache
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_int

        def reset(fn=fn) -> None:
            rc = fn()
            if rc != 0:
                raise RuntimeError(f"cudaCtxResetPersistingL2Cache returned {rc}")
        return reset, path
    return None, "no cupy and no libcudart found"


class CudaEventTimer:
    """Cold (default) or hot samples on one GPU. `nvml` is a detect.Nvml (or a fake) or None."""

    name = "cuda-event"

    def __init__(self, *, l2_bytes: int, device_index: int = 0, hot: bool = False,
                 flush_bytes: Optional[int] = None, nvml: Any = None, nvml_index: Optional[int] = None,
                 max_sm_clock_mhz: Optional[float] = None, sleep_us: float = 40.0,
                 min_block_us: float = 100.0, torch_module: Any = None,
                 l2_resetter: Optional[Callable[[], None]] = None) -> None:
        # torch_module and l2_resetter stand in for torch and the L2 reset in CPU tests
        torch = self._torch = torch_module if torch_module is not None else importlib.import_module("torch")
        self.device = torch.device("cuda", device_index)
        self.mode = "hot" if hot else "cold"
        self.nvml, self.nvml_index = nvml, device_index if nvml_index is None else nvml_index
        self.cycles_per_us = float(max_sm_clock_mhz or 2000.0)  # at the max clock: sleeps at least sleep_us
        self.sleep_us = sleep_us
        self.min_block_us = min_block_us
        self.calls_per_block: dict[str, int] = {}
        self._launch_us: dict[str, float] = {}
        self.syncs: set[str] = set()  # sides whose calls wait for the GPU inside: no sleep hides their launches
        self._outlasted: dict[str, int] = {}  # consecutive calls whose host time outlasted a grown sleep
        self.flush_bytes: Optional[int] = None
        self._buf = None
        if not hot:
            self.flush_bytes = max(int(flush_bytes or 0), 2 * int(l2_bytes), 1 << 20)
            self._buf = torch.empty(self.flush_bytes, dtype=torch.uint8, device=self.device)
        if hot:
            self._reset, self.l2_reset_via = None, "hot: no flush"
        elif l2_resetter is not None:
            self._reset, self.l2_reset_via = l2_resetter, "given"
        else:
            self._reset, self.l2_reset_via = _l2_resetter()
        self.l2_reset: Optional[bool] = None if hot else (self._reset is not None)
        self._start = torch.cuda.Event(enable_timing=True)
        self._end = torch.cuda.Event(enable_timing=True)

    def call(self, fn: Callable[[], Any]) -> Any:
        """An untimed call, returned once the device has finished its work."""
        out = fn()
        self._torch.cuda.synchronize(self.device)
        return out

    def _nvml(self) -> Optional[dict]:
        if self.nvml is None:
            return None
        try:
            return self.nvml.sample(self.nvml_index)
        except Exception:
            return None

    def _flush(self) -> None:
        # reset persisting lines first, then write the buffer: the write then evicts them too
        if self._reset is not None:
            try:
                self._reset()
            except Exception:
                self._reset, self.l2_reset = None, False
        assert self._buf is not None  # allocated in cold mode, the only one that flushes
        self._buf.zero_()

    def _timed(self, side: str, fn: Callable[[], Any], n: int) -> tuple[float, Any]:
        torch = self._torch
        # Keep the queue busy while the host launches: at least sleep_us, and longer than the
        # host took to launch this side last time, so launch latency stays out of the events.
        # A call that waits for the GPU inside (`.item()`, `nonzero`) waits for the sleep too, so
        # its host time grew with every sleep, the sleep to its 5 ms cap, and the time outside the
        # events past the bracket's bound (issue 23): such a side keeps the shortest sleep.
        grown = 1.5 * self._launch_us.get(side, 0.0)
        wait_us = self.sleep_us if side in self.syncs else min(max(self.sleep_us, grown), 5000.0)
        torch.cuda._sleep(int(wait_us * self.cycles_per_us))
        h0 = _PERF()
        self._start.record()
        out = None
        for _ in range(n):
            out = fn()
        self._end.record()
        host_us, prev = (_PERF() - h0) / 1000.0, self._launch_us.get(side, 0.0)
        # the host outlasted a sleep already grown past its own last launch time: a launch-bound
        # call does so only on a spike (its launches take as long with any sleep), a call that waits
        # for the GPU every time; three in a row mark the side
        over = wait_us > self.sleep_us and host_us > wait_us
        self._outlasted[side] = self._outlasted.get(side, 0) + 1 if over else 0
        if self._outlasted[side] >= SYNC_MARK:
            self.syncs.add(side)
        self._launch_us[side] = host_us if host_us > prev else 0.9 * prev + 0.1 * host_us  # rise fast, decay slowly
        self._end.synchronize()
        return self._start.elapsed_time(self._end) * 1000.0 / n, out

    def calibrate(self, side: str, fn: Callable[[], Any]) -> int:
        """Cold: one call per sample, none made. Hot: doubles a back-to-back block until its events span
        min_block_us (at most 4096 calls). Returns the calls made."""
        if self.mode == "cold":
            self.calls_per_block[side] = 1
            return 0
        n, made = 1, 0  # hot: grow a back-to-back block until it is long enough to time
        while True:
            us, _ = self._timed(side, fn, n)
            made += n
            if us * n >= self.min_block_us or n >= 4096:
                break
            n *= 2
        self.calls_per_block[side] = n
        return made

    def sample(self, side: str, fn: Callable[[], Any]) -> Sample:
        """One block between CUDA events, after an L2 flush and persisting-line reset when cold; NVML read before
        and after gives the OR of the throttle bits and the lower SM clock."""
        n = self.calls_per_block.get(side, 1)
        before = self._nvml()
        if self.mode == "cold":
            self._flush()
        us, out = self._timed(side, fn, n)
        after = self._nvml()
        reads = [x for x in (before, after) if x]
        reasons = None
        if any(x.get("throttle_reasons") is not None for x in reads):
            reasons = 0
            for x in reads:
                reasons |= int(x.get("throttle_reasons") or 0)
        clocks = [x["sm_clock_mhz"] for x in reads if x.get("sm_clock_mhz") is not None]
        return Sample(us=us, out=out, throttle_reasons=reasons,
                      sm_clock_mhz=min(clocks) if clocks else None, calls=n)


def stream_check(event_us: float, activities: list[tuple[Any, float, float]], timed_stream: Any,
                 *, window: Optional[tuple[float, float]] = None, slack_us: float = 2.0) -> tuple[bool, str]:
    """Did device work escape the CUDA events? Pure decision over one profiled call.

    activities: (stream, start_us, end_us) of every kernel/copy the call caused, all streams.
    Refused when their span exceeds event_us * 1.25 + 10 us, or when work on another stream ends
    after the timed stream's last kernel. With `window` (the device times of marker kernels just
    before the start event and just after the end event), the second rule is exact instead:
    no work may start before the window or end after it, on any stream.
    """
    if not activities:
        return True, ""
    first = min(a[1] for a in activities)
    last = max(a[2] for a in activities)
    span = last - first
    if window is not None:
        lo, hi = window
        outside = [a for a in activities if a[1] < lo - slack_us or a[2] > hi + slack_us]
        if outside:
            s = max(outside, key=lambda a: max(lo - a[1], a[2] - hi, 0.0))
            out_us = sum(max(0.0, lo - a[1]) + max(0.0, a[2] - hi) for a in outside)
            return False, (f"kernel work on stream {s[0]} ran outside the timed events "
                           f"({out_us:.1f} us of {span:.1f} us)")
    else:
        timed_ends = [a[2] for a in activities if a[0] == timed_stream]
        if timed_ends:
            t_last = max(timed_ends)
            late = [a for a in activities if a[0] != timed_stream and a[2] > t_last + slack_us]
            if late:
                s = max(late, key=lambda a: a[2])
                return False, (f"kernel work on stream {s[0]} ran outside the timed events "
                               f"({s[2] - t_last:.1f} us of {span:.1f} us)")
    if span > event_us * 1.25 + 10.0:
        others = [a for a in activities if a[0] != timed_stream]
        s = max(others, key=lambda a: a[2])[0] if others else timed_stream
        return False, (f"kernel work on stream {s} ran outside the timed events "
                       f"({span - event_us:.1f} us of {span:.1f} us)")
    return True, ""


@dataclass(frozen=True)
class StreamProfile:
    """profile_activities' findings for stream_check: event time, device work per stream, the markers' window."""

    event_us: float
    activities: tuple[tuple[int, float, float], ...]  # (stream, start_us, end_us), markers removed
    timed_stream: Optional[int]
    window: Optional[tuple[float, float]]              # end of pre-marker, start of post-marker


_DEVICE_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


def profile_activities(fn: Callable[[], Any], *, marker_us: float = 20.0,
                       max_sm_clock_mhz: Optional[float] = None) -> StreamProfile:
    """Profile one call with torch.profiler (CUPTI) and collect device work on all streams.

    Spin-kernel markers on the current stream bracket the events: the pre-marker's end bounds the
    start event from below and the post-marker's start bounds the end event from above; their
    stream is the timed stream (profiler stream ids are CUPTI's, not cudaStream_t pointers).
    """
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    cycles = int(marker_us * float(max_sm_clock_mhz or 2000.0))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        torch.cuda._sleep(cycles)
        start.record()
        out = fn()
        end.record()
        torch.cuda._sleep(cycles // 4)
        torch.cuda.synchronize()
    del out
    event_us = start.elapsed_time(end) * 1000.0
    work: list[tuple[int, float, float]] = []
    markers: list[tuple[int, float, float]] = []
    for e in prof.events():
        if e.device_type != DeviceType.CUDA:
            continue
        kind = (getattr(e, "activity_type", None) or "kernel").lower()
        if not any(k in kind for k in _DEVICE_WORK) or "annotation" in kind:
            continue
        item = (int(e.device_resource_id), float(e.time_range.start), float(e.time_range.end))
        (markers if "spin_kernel" in e.name else work).append(item)
    markers.sort(key=lambda a: a[1])
    window = (markers[0][2], markers[-1][1]) if len(markers) >= 2 else None
    timed = markers[0][0] if markers else None
    return StreamProfile(event_us=event_us, activities=tuple(work), timed_stream=timed, window=window)


def check_streams(fn: Callable[[], Any], **kw: Any) -> tuple[bool, str]:
    """profile_activities + stream_check for one call: the worker's side-stream gate."""
    p = profile_activities(fn, **kw)
    return stream_check(p.event_us, list(p.activities), p.timed_stream, window=p.window)
