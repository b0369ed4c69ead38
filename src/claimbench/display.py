"""How a published number reads in the list: metric-appropriate units, short dtype names."""

from __future__ import annotations

import math

DTYPE_SHORT = {"float64": "fp64", "float32": "fp32", "float16": "fp16", "bfloat16": "bf16",
               "float8_e4m3fn": "fp8 e4m3", "float8_e5m2": "fp8 e5m2"}


def dtype_short(dtype: str) -> str:
    return DTYPE_SHORT.get(dtype, dtype)


def _sig(x: float, digits: int = 3) -> str:
    """`digits` significant figures without scientific notation: 612, 3.90, 12.3."""
    if x == 0:
        return "0"
    places = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{places}f}"


def format_value(metric: str, value: float, floor_term: str = "", baseline: str = "") -> str:
    """The number as a reader expects it: 1.62× vs X, 612 TFLOP/s, 3.90 TB/s, 84% of ..., 12.3 µs."""
    if metric == "speedup":
        return f"{value:.2f}×" + (f" vs {baseline}" if baseline else "")
    if metric == "tflops":
        return f"{_sig(value)} TFLOP/s"
    if metric == "gbps":
        return f"{_sig(value / 1000)} TB/s" if value >= 1000 else f"{_sig(value)} GB/s"
    if metric == "sol_fraction":
        term = floor_term.lower()
        what = ("measured matmul rate" if "flop" in term or "matrix" in term
                else "measured copy BW" if "byte" in term or "band" in term else "the measured floor")
        return f"{value * 100:.0f}% of {what}"
    if metric == "time_us":
        return f"{_sig(value)} µs"
    return f"{_sig(value)} {metric}"


def safe_text(text: str) -> str:
    """One line without HTML comment markers, so it can sit inside a claimbench region."""
    return " ".join(text.replace("<!--", "").replace("-->", "").split())
