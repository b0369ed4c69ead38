"""Rounding float64 values to a lower precision, vectorized: the null model's "one precision lower".

The null models round the whole reference on every trial, so their cost scales with the output: a
search over the 256 codes of an 8-bit format cost about 0.34 us an element on a 2-core machine,
30 s for an 8192^2 output and minutes for the 2^28-element outputs the GPU claims produce (issue
23). Arithmetic on exponent and mantissa costs a few passes instead: for a format with `m` stored
mantissa bits and smallest normal exponent `emin`, the quantum at |x| in [2^e, 2^(e+1)) is
2^(max(e, emin) - m); scaling by it is exact (a power of two), `rint` rounds to nearest with ties
to even (an even quotient is an even mantissa, so the even code), and scaling back is exact.
Out-of-range values saturate for the 8-bit formats, as the codec's encoder does; bfloat16 keeps
torch's path (through float32, overflow to infinity), on the float32 bits.
"""

from __future__ import annotations

import numpy as np

# stored mantissa bits, smallest normal exponent, largest finite value
FP8 = {"float8_e4m3fn": (3, -6, 448.0), "float8_e5m2": (2, -14, 57344.0)}


def round_values(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 ``x`` rounded to ``dtype`` (nearest, ties to even), back in float64."""
    x = np.asarray(x, dtype=np.float64)
    if dtype == "float64":
        return x.copy()
    if dtype in ("float16", *FP8):  # through float32, as torch casts (and as a kernel's float32
        with np.errstate(over="ignore", invalid="ignore"):  # accumulator is rounded): a value within a
            x = x.astype(np.float32).astype(np.float64)     # float32 ulp of a midpoint rounds as torch does
    if dtype in ("float32", "float16"):
        with np.errstate(over="ignore"):
            return x.astype(np.float32 if dtype == "float32" else np.float16).astype(np.float64)
    if dtype == "bfloat16":
        return _bfloat16(x)
    if dtype in FP8:
        mbits, emin, top = FP8[dtype]
        return _fp8(x, mbits, emin, top=top)
    raise ValueError(f"cannot round to {dtype!r}")


def _bfloat16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        f = x.astype(np.float32)
    bits = f.view(np.uint32)
    rounded = bits + (np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))  # wraps only for NaN codes
    rounded &= np.uint32(0xFFFF0000)
    out = rounded.view(np.float32).astype(np.float64)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = np.nan
    return out


def _fp8(x: np.ndarray, mbits: int, emin: int, *, top: float) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        _, e = np.frexp(x)                      # x = f * 2^e with 0.5 <= |f| < 1: the leading bit is 2^(e-1)
        q = np.maximum(e - 1, emin) - mbits     # the quantum's exponent
        y = np.ldexp(np.rint(np.ldexp(x, -q)), q)
        np.clip(y, -top, top, out=y)            # saturate (NaN stays NaN, infinity becomes the largest value)
    y[y == 0] = 0.0                             # -0.0 -> +0.0, as the encoder maps zero to the +0 code
    return y
