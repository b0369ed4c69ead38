"""Stage 6: the physics floor, from ceilings measured on this very machine.

A time below max(flops / matrix rate, bytes / bandwidth) is proof of a bug or a cheat (no public
harness hard-rejects it: ANCHORS.md section 2). The ceilings are measured, never datasheet
peaks: bandwidth from a large copy (bytes read + written), matrix rate from a large matmul
through the vendor library (cuBLAS, or torch's CPU BLAS) on random data. Measured once per
machine and cached as JSON keyed by GPU UUID or CPU model.

Rates err high on purpose: a ceiling set too high only weakens the floor, one set too low
would reject an honest kernel.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from claimbench.hardware import Hardware

FLOOR_FACTOR = 0.9  # below 90% of the floor is impossible; the margin covers a copy_ that is not
                    # quite the best possible streaming kernel
DEFAULT_DTYPES = {"cuda": ("bfloat16", "float16", "tf32", "float32", "float8", "int8", "float64"),
                  "cpu": ("float32", "float64", "bfloat16", "float16")}


@dataclass(frozen=True)
class Ceilings:
    key: str                                   # GPU UUID or CPU model
    device: str                                # "cuda" | "cpu"
    bandwidth_gbps: float
    matrix_tflops: dict[str, Optional[float]]  # "bfloat16", "tf32", "float8", "int8", ...; None: not native
    measured_at: str                           # ISO 8601, UTC
    method: str
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Ceilings":
        return cls(**{k: d[k] for k in ("key", "device", "bandwidth_gbps", "matrix_tflops", "measured_at", "method")},
                   details=d.get("details", {}))


# ---- the pure rules -------------------------------------------------------------------------

_MEASURABLE = ("bfloat16", "float16", "tf32", "float32", "float64", "float8", "int8")


def canonical(dtype: str) -> str:
    """The measured precision a claim dtype maps to: float8_e4m3fn -> float8, uint8 -> int8."""
    d = dtype.lower()
    if d.startswith("float8"):
        return "float8"
    if d in ("uint8", "int8", "int4"):
        return "int8"
    return d


def rate_tflops(c: Ceilings, dtype: str) -> tuple[Optional[float], str]:
    """The matrix rate that bounds a claim in `dtype`, and which measurement it came from."""
    r = c.matrix_tflops
    d = dtype.lower()
    if canonical(d) in ("float8", "int8"):
        key = canonical(d) if r.get(canonical(d)) else "bfloat16"
    elif d == "float32" and c.device == "cuda":
        # the fastest unit that can deliver fp32-accurate results is no faster than tf32
        vals = [(r.get(k), k) for k in ("tf32", "float32") if r.get(k)]
        return (max(vals)[0], max(vals)[1]) if vals else (None, "float32")
    else:
        key = d
    return r.get(key), key


def floor_us(flops: Optional[float], bytes: Optional[float], ceilings: Ceilings, dtype: str, *,
             cold: bool, working_set_bytes: float, cache_bytes: float) -> tuple[float, str]:
    """The physics floor in microseconds, and which term bound it.

    The memory term applies to cold runs whose working set exceeds the cache, and to any run
    whose working set exceeds twice the cache (hot data cannot stay resident then); otherwise
    only the compute term does.
    """
    rate, key = rate_tflops(ceilings, dtype)
    if flops and rate:
        compute = flops / (rate * 1e12) * 1e6
        compute_why = f"compute: {flops:.3g} flop at {rate:.4g} TFLOP/s ({key}) = {compute:.4g} us"
    elif flops:
        compute, compute_why = 0.0, f"no measured matrix rate for {dtype}: compute floor 0"
    else:
        compute, compute_why = 0.0, "no flops declared: compute floor 0"
    memory_applies = (cold and working_set_bytes > cache_bytes) or working_set_bytes > 2 * cache_bytes
    if memory_applies and bytes:
        memory = bytes / (ceilings.bandwidth_gbps * 1e9) * 1e6
        memory_why = f"memory: {bytes:.3g} B at {ceilings.bandwidth_gbps:.4g} GB/s = {memory:.4g} us"
        if memory >= compute:
            return memory, memory_why
    elif not memory_applies:
        compute_why += " (working set fits in cache: memory floor not applied)"
    return compute, compute_why


def floor_violation(median_us: float, floor: float) -> bool:
    return median_us < FLOOR_FACTOR * floor


def sol_fraction(median_us: float, floor: float) -> Optional[float]:
    """Fraction of speed of light: floor / measured (1.0 = at the measured ceiling)."""
    return floor / median_us if median_us > 0 and floor > 0 else None


def achieved_tflops(flops: float, median_us: float) -> float:
    return flops / (median_us * 1e-6) / 1e12


def achieved_gbps(bytes: float, median_us: float) -> float:
    return bytes / (median_us * 1e-6) / 1e9


# ---- measuring ------------------------------------------------------------------------------

def _time_us(fn, device: str, reps: int) -> float:
    """Best of `reps` timed calls after two untimed ones (CUDA events, or the timing clock).

    The best, not the median: a ceiling is a capability, and one measured during a noisy moment
    would sit low and make the floor reject honest kernels.
    """
    import torch

    from claimbench.timing import _NOW

    for _ in range(2):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()
        times = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            times.append(a.elapsed_time(b) * 1000.0)
        return min(times)
    times = []
    for _ in range(reps):
        t0 = _NOW()
        fn()
        times.append((_NOW() - t0) / 1000.0)
    return min(times)


def _cpu_flags() -> set[str]:
    try:
        m = re.search(r"^flags\s*:\s*(.+)$", Path("/proc/cpuinfo").read_text(), re.M)
        return set(m.group(1).split()) if m else set()
    except OSError:
        return set()


def _cpu_native(dtype: str) -> bool:
    flags = _cpu_flags()
    if dtype == "bfloat16":
        return bool(flags & {"avx512_bf16", "amx_bf16"})
    if dtype == "float16":
        return bool(flags & {"avx512_fp16", "amx_fp16"})
    return dtype in ("float32", "float64")


def _matmul_tflops(dtype: str, device: str, n: int, reps: int) -> Optional[float]:
    import torch

    g = torch.Generator(device="cpu").manual_seed(0)
    if dtype in ("float8", "int8"):
        if device != "cuda":
            return None
        a = torch.randn(n, n, generator=g).to(device)
        b = torch.randn(n, n, generator=g).to(device)
        if dtype == "float8":
            if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
                return None
            a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn).t()  # column-major B
            one = torch.ones((), device=device)
            fn = lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)  # noqa: E731
        else:
            if not hasattr(torch, "_int_mm"):
                return None
            ai = (a * 20).clamp(-127, 127).to(torch.int8)
            bi = (b * 20).clamp(-127, 127).to(torch.int8)
            fn = lambda: torch._int_mm(ai, bi)  # noqa: E731
    else:
        tdt = torch.float32 if dtype == "tf32" else getattr(torch, dtype)
        a = torch.randn(n, n, generator=g, dtype=torch.float32).to(device=device, dtype=tdt)
        b = torch.randn(n, n, generator=g, dtype=torch.float32).to(device=device, dtype=tdt)
        fn = lambda: torch.matmul(a, b)  # noqa: E731
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        us = _time_us(fn, device, reps)
    except (RuntimeError, TypeError, NotImplementedError):
        return None
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return 2.0 * n ** 3 / (us * 1e-6) / 1e12


def measure_ceilings(device: str, dtypes: Optional[tuple[str, ...]] = None, *, key: str = "",
                     cache_bytes: Optional[int] = None, copy_bytes: Optional[int] = None,
                     matmul_n: Optional[int] = None, reps: int = 10, bandwidth: bool = True,
                     known_bandwidth_gbps: float = 0.0) -> Ceilings:
    """Measure bandwidth (copy of >= 8x the cache) and the matrix rate of each dtype.

    On a GPU the rate is the best of 4096^3 and 8192^3 matmuls; on a CPU the size is grown until
    one takes about 100 ms. CPU dtypes without native multiply instructions, and dtypes with no
    matrix unit (int32, int64), are recorded as None. `matmul_n` / `copy_bytes` shrink it for tests.
    """
    import torch

    dtypes = tuple(dtypes) if dtypes is not None else DEFAULT_DTYPES[device]
    details: dict[str, Any] = {}
    gbps = known_bandwidth_gbps
    if bandwidth:
        cache = cache_bytes or (torch.cuda.get_device_properties(0).L2_cache_size if device == "cuda" else 32 << 20)
        nbytes = copy_bytes or max(8 * cache, 1 << 30 if device == "cuda" else 256 << 20)
        src = torch.rand(nbytes // 4, device=device)
        dst = torch.empty_like(src)
        copy_gbps = 2 * src.numel() * 4 / (_time_us(lambda: dst.copy_(src), device, reps) * 1e-6) / 1e9
        # a read-only stream can beat a copy's read+write mix: take the higher, the floor errs low
        read_gbps = src.numel() * 4 / (_time_us(lambda: src.sum(), device, reps) * 1e-6) / 1e9
        gbps = max(copy_gbps, read_gbps)
        details.update(copy_bytes=int(src.numel() * 4), copy_gbps=copy_gbps, read_gbps=read_gbps)
        del src, dst
    rates: dict[str, Optional[float]] = {}
    for dt in dict.fromkeys(canonical(d) for d in dtypes):
        if dt not in _MEASURABLE or (device == "cpu" and not _cpu_native(dt)):
            rates[dt] = None
            continue
        sizes = (matmul_n,) if matmul_n else ((4096, 8192) if device == "cuda" else (_cpu_matmul_n(dt),))
        got = [r for r in (_matmul_tflops(dt, device, n, reps) for n in sizes) if r]
        rates[dt] = max(got) if got else None  # the best size: a ceiling must not sit low
        details[f"matmul_n_{dt}"] = list(sizes)
    if device == "cpu" and rates.get("float32"):
        for dt in ("bfloat16", "float16"):
            if rates.get(dt):  # bf16 dot instructions do twice fp32's work per lane; torch may not use them
                rates[dt] = max(rates[dt], 2 * rates["float32"])
    method = (f"bandwidth: dst.copy_(src), bytes read + written (or a read-only sum, if faster), best of {reps}; "
              f"matrix: torch.matmul (torch._scaled_mm fp8, torch._int_mm int8) n^3 random data, "
              f"best of {reps}, on {device}")
    return Ceilings(key=key, device=device, bandwidth_gbps=gbps, matrix_tflops=rates,
                    measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    method=method, details=details)


def _cpu_matmul_n(dtype: str, target_us: float = 100_000.0) -> int:
    import torch

    n = 256
    while n < 8192:
        a = torch.randn(n, n).to(getattr(torch, dtype))
        us = _time_us(lambda: torch.matmul(a, a), "cpu", 1)
        if us >= target_us / 8:
            return max(n, int(n * (target_us / us) ** (1 / 3)) // 64 * 64)
        n *= 2
    return n


def cache_key(hw: "Hardware") -> str:
    return hw.gpus[0].uuid or hw.gpus[0].name if hw.device == "cuda" and hw.gpus else hw.cpu.model


def _cache_path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / f"ceilings-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _read_cache(path: Path, key: str, device: str) -> Optional[Ceilings]:
    try:
        cached = Ceilings.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return cached if cached.key == key and cached.device == device else None


def load_cached(cache_dir: Path, hw: "Hardware", dtypes: tuple[str, ...]) -> Optional[Ceilings]:
    """The cached ceilings when they cover every dtype, without torch and without a process;
    None when something must be measured (``load_or_measure``, in a kernel-free process)."""
    cached = _read_cache(_cache_path(cache_dir, cache_key(hw)), cache_key(hw), hw.device)
    if cached is None or any(canonical(d) not in cached.matrix_tflops for d in dtypes):
        return None
    return cached


def load_or_measure(cache_dir: Path, hw: "Hardware", dtypes: Optional[tuple[str, ...]] = None,
                    **measure_kw: Any) -> Ceilings:
    """Cached ceilings for this device; measure what is missing (all of it, or new dtypes)."""
    key = cache_key(hw)
    path = _cache_path(cache_dir, key)
    dtypes = tuple(dtypes) if dtypes is not None else DEFAULT_DTYPES[hw.device]
    cached = _read_cache(path, key, hw.device)
    if cached is not None:
        missing = tuple(d for d in dtypes if canonical(d) not in cached.matrix_tflops)
        if not missing:
            return cached
        extra = measure_ceilings(hw.device, missing, key=key, bandwidth=False,
                                 known_bandwidth_gbps=cached.bandwidth_gbps, **measure_kw)
        result = replace(cached, matrix_tflops={**cached.matrix_tflops, **extra.matrix_tflops},
                         details={**cached.details, **extra.details})
    else:
        cache = hw.gpus[0].l2_bytes if hw.device == "cuda" and hw.gpus else hw.cpu.llc_bytes
        measure_kw.setdefault("cache_bytes", cache)
        result = measure_ceilings(hw.device, dtypes, key=key, **measure_kw)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    os.replace(tmp, path)
    return result
