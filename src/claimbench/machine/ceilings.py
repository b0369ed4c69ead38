"""Stage 6: the physics floor, from ceilings measured on this very machine.

A time below max(flops / matrix rate, bytes / bandwidth) is proof of a bug or a cheat (no public
harness hard-rejects it: ANCHORS.md section 2). The ceilings are measured, never datasheet
peaks: bandwidth from a large copy (bytes read + written), matrix rate from a large matmul
through the vendor library (cuBLAS, or torch's CPU BLAS) on random data.

A ceiling measured once, on a shared machine, moved by a factor of 8 minutes apart, and a floor
standing on a low one rejects honest kernels. So each ceiling is the best of several short
passes, interleaved so a burst of someone else's work hits one pass of each rather than every
pass of one; the passes' spread is stored, and a ceiling whose spread is wide is measured again
(another set of passes, and again on a later run while it stays wide). The floor uses the
optimistic end, best x (1 + spread): a ceiling set too high only weakens the floor, one set too
low would reject an honest kernel. The result is cached once per machine, keyed by its hardware
fingerprint, in the user's cache folder (``$XDG_CACHE_HOME/claimbench``), shared by every
results folder; ``run --ceilings PATH`` names another. Ceilings are measured in a process that
never imports a kernel (``python -m claimbench.machine.ceilings``, progress on stderr).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Optional

from claimbench.store.cachefile import user_cache_dir

if TYPE_CHECKING:
    from claimbench.machine.hardware import Hardware

FLOOR_FACTOR = 0.9  # below 90% of the floor is impossible; the margin covers a copy_ that is not
                    # quite the best possible streaming kernel
DEFAULT_DTYPES = {"cuda": ("bfloat16", "float16", "tf32", "float32", "float8", "int8", "float64"),
                  "cpu": ("float32", "float64", "bfloat16", "float16")}
CACHE_FLOOR_MIN = 0.25    # the cache floor applies to working sets of at least this fraction of
                          # the cache: the smallest set the cache bandwidth was measured over
CACHE_SHARES = (32, 16, 8, 4)  # copies of cache/32 .. cache/4 per buffer give the cache bandwidth
PASSES = 5                # interleaved passes per set; a ceiling is the best of them
REPS = 3                  # timed calls per pass (best of), after two untimed ones
WIDE_SPREAD = 0.10        # (best - worst) / best of a set's passes above this: measure another set
MAX_SETS = 3              # sets in one measurement; past them the ceiling is kept, marked unsettled
RETRY_UNSETTLED_S = 3600  # an unsettled ceiling is measured again by a run at least this much later
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Ceilings:
    key: str                                   # GPU UUID or CPU model
    device: str                                # "cuda" | "cpu"
    bandwidth_gbps: float
    matrix_tflops: dict[str, Optional[float]]  # "bfloat16", "tf32", "float8", "int8", ...; None: not native
    measured_at: str                           # ISO 8601, UTC
    method: str
    details: dict[str, Any] = field(default_factory=dict)
    fingerprint: str = ""                      # the machine's hardware fingerprint: the cache key
    spread: dict[str, float] = field(default_factory=dict)  # "bandwidth", "cache" and each dtype: (best - worst) / best
    cache_gbps: Optional[float] = None         # CPU: a copy or sum whose data stays in the last-level cache

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Ceilings":
        return cls(**{k: d[k] for k in ("key", "device", "bandwidth_gbps", "matrix_tflops", "measured_at", "method")},
                   details=d.get("details", {}), fingerprint=d.get("fingerprint", ""), spread=d.get("spread") or {},
                   cache_gbps=d.get("cache_gbps"))

    def optimistic(self, name: str, best: float) -> float:
        """The optimistic end of a ceiling: its best pass, raised by the passes' own spread."""
        return best * (1 + max(0.0, float(self.spread.get(name) or 0.0)))


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


def floor_us(flops: Optional[float], bytes: Optional[float], ceilings: Ceilings, *, dtype: str, cold: bool, working_set_bytes: float, cache_bytes: float) -> tuple[float, str]:
    """The physics floor in microseconds, and which term bound it.

    The memory term applies to cold runs whose working set exceeds the cache, and to any run
    whose working set exceeds twice the cache (hot data cannot stay resident then). A smaller
    working set, of at least a quarter of the cache, is held to the cache bandwidth where one was
    measured (the CPU's): no honest stream moves its bytes faster than a copy or a sum whose data
    stays in the cache, while a working set that small gets no floor from DRAM's bandwidth.
    Below a quarter of the cache only the compute term applies.
    """
    rate, key = rate_tflops(ceilings, dtype)
    if flops and rate:
        rate = ceilings.optimistic(key, rate)
        compute = flops / (rate * 1e12) * 1e6
        compute_why = f"compute: {flops:.3g} flop at {rate:.4g} TFLOP/s ({key}{_spread_note(ceilings, key)}) = {compute:.4g} us"
    elif flops:
        compute, compute_why = 0.0, f"no measured matrix rate for {dtype}: compute floor 0"
    else:
        compute, compute_why = 0.0, "no flops declared: compute floor 0"
    memory_applies = (cold and working_set_bytes > cache_bytes) or working_set_bytes > 2 * cache_bytes
    if memory_applies and bytes:
        bandwidth = ceilings.optimistic("bandwidth", ceilings.bandwidth_gbps)
        memory = bytes / (bandwidth * 1e9) * 1e6
        memory_why = f"memory: {bytes:.3g} B at {bandwidth:.4g} GB/s{_spread_note(ceilings, 'bandwidth', ' (')} = {memory:.4g} us"
        if memory >= compute:
            return memory, memory_why
    elif not memory_applies and bytes and ceilings.cache_gbps and working_set_bytes >= CACHE_FLOOR_MIN * cache_bytes:
        bandwidth = ceilings.optimistic("cache", ceilings.cache_gbps)
        memory = bytes / (bandwidth * 1e9) * 1e6
        if memory >= compute:
            return memory, (f"cache: {bytes:.3g} B at {bandwidth:.4g} GB/s{_spread_note(ceilings, 'cache', ' (')}"
                            f" = {memory:.4g} us (working set in cache: its bandwidth, not DRAM's)")
    elif not memory_applies:
        compute_why += " (working set fits in cache: memory floor not applied)"
    return compute, compute_why


def _spread_note(c: Ceilings, name: str, lead: str = ", ") -> str:
    close = ")" if lead.startswith(" (") else ""
    return f"{lead}best pass + its {c.spread[name]:.1%} spread{close}" if c.spread.get(name) else ""


def floor_violation(median_us: float, floor: float) -> bool:
    return median_us < FLOOR_FACTOR * floor


def sol_fraction(median_us: float, floor: float) -> Optional[float]:
    """Fraction of speed of light: floor / measured (1.0 = at the measured ceiling)."""
    return floor / median_us if median_us > 0 and floor > 0 else None


def achieved_tflops(flops: float, median_us: float) -> float:
    return flops / (median_us * 1e-6) / 1e12


def achieved_gbps(bytes: float, median_us: float) -> float:
    return bytes / (median_us * 1e-6) / 1e9


def measure_now(device: str, dtypes: Optional[tuple[str, ...]] = None, **kw: Any) -> "Ceilings":
    """Measure now, in this process, through ``ceilings_measure.measure_ceilings``: torch is imported
    there, on this call, never by the data layer that loads this module."""
    from claimbench.machine.ceilings_measure import measure_ceilings as measure

    return measure(device, dtypes, **kw)


# ---- the per-machine cache ------------------------------------------------------------------

def cache_key(hw: "Hardware") -> str:
    """The machine as a person reads it: GPU UUID (or name), or the CPU model."""
    return hw.gpus[0].uuid or hw.gpus[0].name if hw.device == "cuda" and hw.gpus else hw.cpu.model


def fingerprint(hw: "Hardware") -> str:
    """What the ceilings depend on: the devices (model, count, UUIDs, SMs, memory), the CPU
    (model, cores, threads, caches) and the library doing the work (torch's version)."""
    gpus = [(g.name, g.uuid, g.sm_count, g.memory_bytes, g.l2_bytes) for g in hw.gpus] if hw.device == "cuda" else []
    c = hw.cpu
    parts = [hw.device, gpus, c.model, c.cores, c.threads_used, c.llc_bytes, hw.software.torch]
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def cache_dir(explicit: Optional[Path] = None) -> Path:
    """Where ceilings are cached: `run --ceilings PATH` when given, else the user's cache folder."""
    return Path(explicit) if explicit is not None else user_cache_dir()


def _cache_path(cache_dir: Path, hw: "Hardware") -> Path:
    return Path(cache_dir) / f"ceilings-{fingerprint(hw)[:16]}.json"


def _read_cache(path: Path, hw: "Hardware") -> Optional[Ceilings]:
    try:
        cached = Ceilings.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return cached if cached.fingerprint == fingerprint(hw) and cached.device == hw.device else None


def _to_measure(cached: Ceilings, dtypes: tuple[str, ...], now: Optional[datetime] = None) -> tuple[tuple, bool]:
    """(dtypes to measure, whether bandwidth is): the missing, and the unsettled once they are old."""
    missing = [d for d in dict.fromkeys(canonical(d) for d in dtypes) if d not in cached.matrix_tflops]
    unsettled = set(cached.details.get("unsettled") or ())
    try:
        age_s = ((now or datetime.now(timezone.utc)) - datetime.fromisoformat(cached.measured_at)).total_seconds()
    except (TypeError, ValueError):
        age_s = float("inf")
    no_cache = cached.device == "cpu" and cached.cache_gbps is None  # measured before the cache ceiling existed
    if unsettled and age_s >= RETRY_UNSETTLED_S:
        missing += [d for d in dict.fromkeys(canonical(d) for d in dtypes) if d in unsettled and d not in missing]
        return tuple(missing), no_cache or bool({"bandwidth", "cache"} & unsettled)
    return tuple(missing), no_cache


def load_cached(cache_dir: Path, hw: "Hardware", dtypes: tuple[str, ...]) -> Optional[Ceilings]:
    """The cached ceilings when nothing needs measuring, without torch and without a process;
    None when something must be measured (``load_or_measure``, in a kernel-free process)."""
    cached = _read_cache(_cache_path(cache_dir, hw), hw)
    if cached is None or any(_to_measure(cached, dtypes)):
        return None
    return cached


def _merge(old: Ceilings, new: Ceilings, bandwidth: bool) -> Ceilings:
    """A later measurement raises a ceiling, never lowers it (the machine did not get slower; the
    earlier pass was luckier), and its spread replaces the old one."""
    rates = dict(old.matrix_tflops)
    for k, v in new.matrix_tflops.items():
        rates[k] = max(v, rates.get(k) or 0.0) if v is not None else rates.get(k)
    spread = {**old.spread, **new.spread}
    measured = set(new.spread)
    unsettled = sorted((set(old.details.get("unsettled") or ()) - measured) | set(new.details.get("unsettled") or ()))
    passes = {**(old.details.get("passes") or {}), **(new.details.get("passes") or {})}
    details = {**old.details, **new.details, "passes": passes, "unsettled": unsettled}
    gbps = max(old.bandwidth_gbps, new.bandwidth_gbps) if bandwidth else old.bandwidth_gbps
    caches = [c for c in (old.cache_gbps, new.cache_gbps if bandwidth else None) if c]
    return replace(old, bandwidth_gbps=gbps, matrix_tflops=rates, spread=spread, details=details,
                   measured_at=new.measured_at, method=new.method, cache_gbps=max(caches) if caches else None)


def load_or_measure(cache_dir: Path, hw: "Hardware", dtypes: Optional[tuple[str, ...]] = None,
                    *, progress: Optional[Progress] = None, **measure_kw: Any) -> Ceilings:
    """Cached ceilings for this machine; measure what is missing (all of it, new dtypes, or
    ceilings whose spread stayed wide when they were measured an hour or more ago)."""
    path = _cache_path(cache_dir, hw)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _one_measurement(path.parent, progress):
        return _load_or_measure(path, hw, tuple(dtypes) if dtypes is not None else DEFAULT_DTYPES[hw.device],
                                progress=progress, **measure_kw)


@contextmanager
def _one_measurement(folder: Path, progress: Optional[Progress]) -> Iterator[None]:
    """One measurement of a machine's ceilings at a time, per cache folder (`flock` on the folder).

    Two runs that found the cache empty (or stale) at once, on one machine (CI jobs sharing a
    runner, pytest-xdist workers), each measured: twice the work, each one load on the other
    (which can only widen their spreads). The second now waits and reads what the first wrote. A file system that refuses the lock only
    costs the duplicate measurement, as before."""
    import fcntl

    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if progress is not None:
                progress("waiting for another process measuring this machine's ceilings (it shares the cache folder)")
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # no locks on folders here
            pass
        yield
    finally:
        os.close(fd)


def _load_or_measure(path: Path, hw: "Hardware", dtypes: tuple[str, ...], *, progress: Optional[Progress],
                     **measure_kw: Any) -> Ceilings:
    cached = _read_cache(path, hw)  # read under the lock: whoever held it may have just measured
    key, fp = cache_key(hw), fingerprint(hw)
    if cached is not None:
        missing, bandwidth = _to_measure(cached, dtypes)
        if not missing and not bandwidth:
            return cached
        if bandwidth:
            measure_kw.setdefault("cache_bytes", _cache_bytes(hw))
        extra = measure_now(hw.device, missing, key=key, bandwidth=bandwidth, fingerprint=fp,
                                 known_bandwidth_gbps=cached.bandwidth_gbps, progress=progress, **measure_kw)
        result = _merge(cached, extra, bandwidth)
    else:
        measure_kw.setdefault("cache_bytes", _cache_bytes(hw))
        result = measure_now(hw.device, dtypes, key=key, fingerprint=fp, progress=progress, **measure_kw)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(result.to_dict(), indent=2, sort_keys=True))
    os.replace(tmp, path)
    return result


def _cache_bytes(hw: "Hardware") -> Optional[int]:
    return hw.gpus[0].l2_bytes if hw.device == "cuda" and hw.gpus else hw.cpu.llc_bytes


def main() -> int:
    """``python -m claimbench.machine.ceilings``: the kernel-free process. Reads {"cache", "hardware",
    "dtypes"} as JSON on stdin, prints progress lines on stderr as it goes and the ceilings as
    one JSON line on stdout."""
    from claimbench.machine.hardware import Hardware

    job = json.loads(sys.stdin.read())

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    c = load_or_measure(Path(job["cache"]), Hardware.from_dict(job["hardware"]), tuple(job["dtypes"]), progress=say)
    print(json.dumps(c.to_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
