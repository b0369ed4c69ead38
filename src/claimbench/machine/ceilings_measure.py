"""Measuring the ceilings (torch, in the kernel-free ceilings process): passes, sets, progress.

Each ceiling is a callable giving the best of a few timed calls; a pass calls each once, so the
ceilings take turns and a burst of another process's work lands on one pass of several ceilings
instead of every pass of one. The passes' values are all kept in the result's details.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Optional

from claimbench.machine.ceilings import (
    _MEASURABLE,
    CACHE_SHARES,
    DEFAULT_DTYPES,
    MAX_SETS,
    PASSES,
    REPS,
    WIDE_SPREAD,
    Ceilings,
    Progress,
    canonical,
)


def _timer(fn, device: str) -> Callable[[int], float]:
    """A callable giving the best of n timed calls of fn, in microseconds (CUDA events, or the
    timing clock), after two untimed calls now.

    The best, not the median: a ceiling is a capability, and one measured during a noisy moment
    would sit low and make the floor reject honest kernels.
    """
    import torch

    _NOW = time.perf_counter_ns

    for _ in range(2):
        fn()
    if device == "cuda":
        torch.cuda.synchronize()

    def best_of(n: int) -> float:
        times = []
        for _ in range(n):
            if device == "cuda":
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                fn()
                b.record()
                b.synchronize()
                times.append(a.elapsed_time(b) * 1000.0)
            else:
                t0 = _NOW()
                fn()
                times.append((_NOW() - t0) / 1000.0)
        return min(times)
    return best_of


def _time_us(fn, device: str, reps: int) -> float:
    """Best of `reps` timed calls after two untimed ones."""
    return _timer(fn, device)(reps)


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


def _matmul_rate(dtype: str, device: str, n: int) -> Optional[Callable[[int], float]]:
    """best_of(reps) -> TFLOP/s of an n^3 matmul in `dtype`; None when this device cannot run it."""
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

    def tf32_as(flag: bool):
        prev = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = flag
        return prev

    prev = tf32_as(dtype == "tf32")
    try:
        best_of = _timer(fn, device)
    except (RuntimeError, TypeError, NotImplementedError):
        return None
    finally:
        tf32_as(prev)

    def rate(reps: int) -> float:
        was = tf32_as(dtype == "tf32")
        try:
            return 2.0 * n ** 3 / (best_of(reps) * 1e-6) / 1e12
        finally:
            tf32_as(was)
    return rate


def _spread(values: list[float]) -> float:
    return (max(values) - min(values)) / max(values) if values and max(values) > 0 else 0.0


def _passes(measures: dict[str, Callable[[int], float]], *, passes: int, reps: int, max_sets: int,
            say: Progress) -> tuple[dict[str, list[float]], dict[str, float], int]:
    """Run sets of interleaved passes until every measure's spread is narrow (or max_sets).
    Returns every pass's value per measure, the last set's spread per measure, and the sets run."""
    values: dict[str, list[float]] = {k: [] for k in measures}
    spread: dict[str, float] = {}
    todo = list(measures)
    sets = 0
    while todo and sets < max_sets:
        sets += 1
        fresh: dict[str, list[float]] = {k: [] for k in todo}
        for i in range(passes):
            for k in todo:
                fresh[k].append(measures[k](reps))
            say(f"set {sets} pass {i + 1}/{passes}: " + ", ".join(f"{k} {fresh[k][-1]:.4g}" for k in todo))
        for k in todo:
            values[k] += fresh[k]
            spread[k] = _spread(fresh[k])
        wide = [k for k in todo if spread[k] > WIDE_SPREAD]
        if wide and sets < max_sets:
            say("spread above {:.0%} for {}: measuring them again".format(
                WIDE_SPREAD, ", ".join(f"{k} ({spread[k]:.0%})" for k in wide)))
        todo = wide
    return values, spread, sets


def measure_ceilings(device: str, dtypes: Optional[tuple[str, ...]] = None, *, key: str = "",
                     cache_bytes: Optional[int] = None, copy_bytes: Optional[int] = None,
                     matmul_n: Optional[int] = None, reps: int = REPS, bandwidth: bool = True,
                     known_bandwidth_gbps: float = 0.0, passes: int = PASSES, max_sets: int = MAX_SETS,
                     fingerprint: str = "", progress: Optional[Progress] = None) -> Ceilings:
    """Measure bandwidth (copy of >= 8x the cache, or a read-only sum if faster) and the matrix
    rate of each dtype, each the best of `passes` interleaved passes of best-of-`reps` calls.

    On a GPU the rate is the best of 4096^3 and 8192^3 matmuls; on a CPU the size is grown until
    one takes about 100 ms. CPU dtypes without native multiply instructions, and dtypes with no
    matrix unit (int32, int64), are recorded as None. `matmul_n` / `copy_bytes` shrink it for tests.
    """
    import torch

    say = (lambda m: progress(f"ceilings: {m}")) if progress else (lambda m: None)
    dtypes = tuple(dtypes) if dtypes is not None else DEFAULT_DTYPES[device]
    measures: dict[str, Callable[[int], float]] = {}
    details: dict[str, Any] = {}
    if bandwidth:
        cache = cache_bytes or (torch.cuda.get_device_properties(0).L2_cache_size if device == "cuda" else 32 << 20)
        nbytes = copy_bytes or max(8 * cache, 1 << 30 if device == "cuda" else 256 << 20)
        say(f"copy and read bandwidth over {nbytes / 2**20:.0f} MiB")
        src = torch.rand(nbytes // 4, device=device)
        dst = torch.empty_like(src)
        size = src.numel() * 4
        copy_us, read_us = _timer(lambda: dst.copy_(src), device), _timer(lambda: src.sum(), device)
        measures["copy_gbps"] = lambda r: 2 * size / (copy_us(r) * 1e-6) / 1e9
        measures["read_gbps"] = lambda r: size / (read_us(r) * 1e-6) / 1e9
        details["copy_bytes"] = int(size)
        if device == "cpu":
            measures.update(_cache_measures(cache))
    rates: dict[str, Optional[float]] = {}
    for dt in dict.fromkeys(canonical(d) for d in dtypes):
        if dt not in _MEASURABLE or (device == "cpu" and not _cpu_native(dt)):
            rates[dt] = None
            continue
        if matmul_n:
            sizes: tuple = (matmul_n,)
        else:
            say(f"sizing the {dt} matmul")
            sizes = (4096, 8192) if device == "cuda" else (_cpu_matmul_n(dt),)
        details[f"matmul_n_{dt}"] = list(sizes)
        for n in sizes:
            rate = _matmul_rate(dt, device, n)
            if rate is not None:
                measures[f"{dt}@{n}"] = rate
        rates[dt] = None
    values, spread, sets = _passes(measures, passes=passes, reps=reps, max_sets=max_sets, say=say)
    best = {k: max(v) for k, v in values.items()}
    out_spread: dict[str, float] = {}
    gbps = known_bandwidth_gbps
    cache_gbps = None
    if bandwidth and device == "cpu":
        cache_keys = [k for k in best if k.startswith("cache_")]
        top = max(cache_keys, key=lambda k: best[k])  # the best size and stream: the floor errs low
        cache_gbps, out_spread["cache"] = best[top], spread[top]
        details["cache_gbps_by"] = {k: best[k] for k in cache_keys}
    if bandwidth:
        which = max(("copy_gbps", "read_gbps"), key=lambda k: best[k])
        gbps = best[which]  # a read-only stream can beat a copy's read+write mix: the floor errs low
        out_spread["bandwidth"] = spread[which]
        details.update(copy_gbps=best["copy_gbps"], read_gbps=best["read_gbps"])
    for dt in rates:
        mine = [k for k in best if k.startswith(f"{dt}@")]
        if mine:
            top = max(mine, key=lambda k: best[k])  # the best size: a ceiling must not sit low
            rates[dt], out_spread[dt] = best[top], spread[top]
    f32 = rates.get("float32")
    if device == "cpu" and f32:
        for dt in ("bfloat16", "float16"):
            half = rates.get(dt)
            if half:  # bf16 dot instructions do twice fp32's work per lane; torch may not use them
                rates[dt] = max(half, 2 * f32)
    details.update(passes=values, sets=sets,
                   unsettled=sorted(k for k, v in out_spread.items() if v > WIDE_SPREAD))
    say("done: " + ", ".join([f"bandwidth {gbps:.4g} GB/s"] * bandwidth + ([f"cache {cache_gbps:.4g} GB/s"] if cache_gbps else []) + [
        f"{k} {v:.4g} TFLOP/s" for k, v in rates.items() if v]) + " (spread " +
        ", ".join(f"{k} {v:.1%}" for k, v in out_spread.items()) + ")")
    method = (f"bandwidth: dst.copy_(src), bytes read + written (or a read-only sum, if faster); cache (cpu): the "
              f"same at cache/{max(CACHE_SHARES)} to cache/{min(CACHE_SHARES)} per buffer, the best; matrix: "
              f"torch.matmul (torch._scaled_mm fp8, torch._int_mm int8) n^3 random data; each the best of "
              f"{passes} interleaved passes of best-of-{reps} calls, more sets while a spread exceeds "
              f"{WIDE_SPREAD:.0%}, on {device}")
    return Ceilings(key=key, device=device, bandwidth_gbps=gbps, matrix_tflops=rates,
                    measured_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                    method=method, details=details, fingerprint=fingerprint, spread=out_spread, cache_gbps=cache_gbps)


def _cache_measures(cache: int) -> dict[str, Callable[[int], float]]:
    """A copy and a sum at each of CACHE_SHARES' sizes, whose data stays in the last-level cache.

    Several sizes, and the best one kept: a small copy pays a call's fixed cost on few bytes and
    reads low, a large one starts to spill, and which size is best depends on the machine. A
    ceiling set too low would reject an honest kernel; one set too high only weakens the floor.
    """
    import torch

    out: dict[str, Callable[[int], float]] = {}
    for share in CACHE_SHARES:
        src = torch.rand(max(1024, cache // share // 4))
        dst = torch.empty_like(src)
        size = src.numel() * 4
        out[f"cache_copy@{size}"] = _gbps(_timer(lambda s=src, d=dst: d.copy_(s), "cpu"), 2 * size)
        out[f"cache_read@{size}"] = _gbps(_timer(lambda s=src: s.sum(), "cpu"), size)
    return out


def _gbps(best_us: Callable[[int], float], nbytes: int) -> Callable[[int], float]:
    """GB/s of `nbytes` moved in the best of r calls."""
    return lambda r: nbytes / (best_us(r) * 1e-6) / 1e9


def _cpu_matmul_n(dtype: str, target_us: float = 100_000.0) -> int:
    import torch

    n = 256
    while n < 8192:
        a = torch.randn(n, n).to(getattr(torch, dtype))
        us = _time_us(lambda a=a: torch.matmul(a, a), "cpu", 1)
        if us >= target_us / 8:
            return max(n, int(n * (target_us / us) ** (1 / 3)) // 64 * 64)
        n *= 2
    return n
