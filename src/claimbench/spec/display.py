"""How a published number reads in the list: value and interval in the metric's units, the
machine told apart from its neighbours (GPU model and count; CPU model and cores used), short
dtype names. Strings from claims and records pass through `safetext` before they get here."""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Optional

DTYPE_SHORT = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
               "float8_e4m3fn": "fp8 e4m3", "float8_e5m2": "fp8 e5m2"}
_VENDOR = re.compile(r"^(\d+× )?(NVIDIA|AMD|Intel\(R\)|Intel)\s+")
_CPU_NOISE = re.compile(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|\b\d+-Core\b|@.*$")


def dtype_short(dtype: str) -> str:
    return DTYPE_SHORT.get(dtype, dtype)


def _sig(x: float, digits: int = 3) -> str:
    """`digits` significant figures without scientific notation: 612, 3.90, 12.3."""
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    places = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{places}f}"


def _scale(metric: str, value: float) -> tuple[str, Any]:
    """(unit, formatter) so a value and its interval read in the same unit."""
    if metric == "speedup":
        return "×", lambda x: f"{x:.2f}"
    if metric == "tflops":
        return " TFLOP/s", _sig
    if metric == "gbps":
        return (" TB/s", lambda x: _sig(x / 1000)) if value >= 1000 else (" GB/s", _sig)
    if metric == "sol_fraction":
        return "%", lambda x: f"{x * 100:.0f}"
    if metric == "time_us":
        return " µs", _sig
    return f" {metric}", _sig


def _floor_words(floor_term: str) -> str:
    term = floor_term.lower()
    return ("measured matmul rate" if "flop" in term or "matrix" in term
            else "measured copy BW" if "byte" in term or "band" in term else "the measured floor")


def format_value(metric: str, value: float, floor_term: str = "", *, baseline: str = "") -> str:
    """The number as a reader expects it: 1.62× vs X, 612 TFLOP/s, 3.90 TB/s, 84% of ..., 12.3 µs."""
    return format_number(metric, value, None, ci_high=None, floor_term=floor_term, baseline=baseline)


def format_number(metric: str, value: float, ci_low: Optional[float], *, ci_high: Optional[float],
                  floor_term: str = "", baseline: str = "") -> str:
    """Value, then its 95% interval in the same unit: `1.62× [1.58, 1.66] vs X`,
    `612 TFLOP/s [600, 620]`, `84% [82, 86] of measured copy BW`, `12.3 µs [12.1, 12.5]`."""
    unit, fmt = _scale(metric, value)
    ci = f" [{fmt(ci_low)}, {fmt(ci_high)}]" if ci_low is not None and ci_high is not None else ""
    head = f"{fmt(value)}{unit}{ci}"
    if metric == "speedup":
        return head + (f" vs {baseline}" if baseline else "")
    if metric == "sol_fraction":
        return f"{head} of {_floor_words(floor_term)}"
    return head


@lru_cache(maxsize=1024)
def short_name(name: str) -> str:
    """`H200` for `NVIDIA H200`; vendor words and marks off a CPU model."""
    return _VENDOR.sub(r"\1", " ".join(_CPU_NOISE.sub(" ", str(name)).split())).strip()


def machine_name(hw: dict, protocol: Optional[dict] = None) -> str:
    """What tells two machines apart in the list: a GPU's model and count (`2× H200`), a CPU's
    model and the cores the claim's process used (`Xeon Platinum 8480+ (2 cores)`)."""
    gpus = hw.get("gpus") or []
    if hw.get("device") == "cuda" and gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        name = short_name(str(gpus[0]["name"]))
        return f"{len(gpus)}× {name}" if len(gpus) > 1 else name
    cpu = got if isinstance(got := hw.get("cpu"), dict) else {}
    name = short_name(str(cpu.get("model") or hw.get("name") or hw.get("slug") or "unknown"))
    used = (protocol or {}).get("torch_threads")
    if not _count(used):
        used = cpu.get("threads_used") if _count(cpu.get("threads_used")) else cpu.get("cores")
    return f"{name} ({used} core{'s' if used != 1 else ''})" if _count(used) else name


def _count(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x > 0
