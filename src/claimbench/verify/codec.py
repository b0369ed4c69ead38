"""Bytes <-> numbers for every dtype a claim may use, in numpy alone.

numpy has no bfloat16 or float8, so they are decoded from their bits: bfloat16 is the upper half
of a float32, and the two OCP 8-bit formats (E4M3 without infinities, E5M2 with them) go through
a 256-entry table. Rounding to a lower precision (for the null models) is round-to-nearest-even,
as the hardware casts do.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

# dtype name (torch's, without "torch.") -> (itemsize, numpy storage dtype)
STORAGE: dict[str, tuple[int, type[np.generic]]] = {
    "float64": (8, np.float64), "float32": (4, np.float32), "float16": (2, np.float16),
    "bfloat16": (2, np.uint16), "float8_e4m3fn": (1, np.uint8), "float8_e5m2": (1, np.uint8),
    "int64": (8, np.int64), "int32": (4, np.int32), "int16": (2, np.int16), "int8": (1, np.int8),
    "uint8": (1, np.uint8), "bool": (1, np.bool_),
}
FLOATING = {"float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"}


class CodecError(ValueError):
    pass


def itemsize(dtype: str) -> int:
    try:
        return STORAGE[dtype][0]
    except KeyError:
        raise CodecError(f"unsupported dtype {dtype!r}") from None


@lru_cache(maxsize=None)
def fp8_table(dtype: str) -> np.ndarray:
    """The float64 value of each of the 256 codes."""
    codes = np.arange(256, dtype=np.int64)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    if dtype == "float8_e4m3fn":
        exp, man, bias, mbits = (codes >> 3) & 0xF, codes & 0x7, 7, 3
    elif dtype == "float8_e5m2":
        exp, man, bias, mbits = (codes >> 2) & 0x1F, codes & 0x3, 15, 2
    else:
        raise CodecError(f"not an 8-bit float: {dtype}")
    frac = man / float(1 << mbits)
    val = np.where(exp == 0, frac * 2.0 ** (1 - bias), (1.0 + frac) * 2.0 ** (exp - bias))
    val = sign * val
    if dtype == "float8_e4m3fn":
        val = np.where((exp == 0xF) & (man == 0x7), np.nan, val)
    else:
        val = np.where(exp == 0x1F, np.where(man == 0, sign * np.inf, np.nan), val)
    return val


def to_numbers(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Contiguous storage (numpy, storage dtype) -> float64 (floats) or the integer/bool values."""
    if dtype == "bfloat16":
        return (raw.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if dtype in ("float8_e4m3fn", "float8_e5m2"):
        return fp8_table(dtype)[raw]
    if dtype in FLOATING:
        with np.errstate(invalid="ignore"):  # any bytes a kernel left (signalling NaNs too) decode quietly
            return raw.astype(np.float64)
    return raw


def from_bytes(data: bytes | bytearray | memoryview | np.ndarray, dtype: str, shape: list[int],
               *, strides: list[int] | None = None) -> np.ndarray:
    """Interpret a storage span (the bytes from the first element on) as a tensor of numbers."""
    if dtype not in STORAGE:
        raise CodecError(f"unsupported dtype {dtype!r}")
    size, store = STORAGE[dtype]
    flat = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).reshape(-1)
    n = int(np.prod(shape)) if shape else 1
    if strides is None or is_contiguous(shape, strides):
        need = n * size
        if flat.size < need:
            raise CodecError(f"{flat.size} bytes for a {dtype} tensor of shape {tuple(shape)} ({need} needed)")
        raw: np.ndarray = flat[:need].view(store).reshape(shape)
    else:
        span = 1 + sum((d - 1) * s for d, s in zip(shape, strides) if d > 0) if n else 0
        if flat.size < span * size:
            raise CodecError(f"{flat.size} bytes do not cover a strided {dtype} tensor of shape {tuple(shape)}")
        base = flat[: span * size].view(store)
        raw = np.lib.stride_tricks.as_strided(base, shape=shape, strides=[s * size for s in strides])
        raw = np.ascontiguousarray(raw)
    return to_numbers(raw, dtype)


def span_bytes(dtype: str, shape: list[int], strides: list[int]) -> int:
    """Bytes from the first element to the end of the last one."""
    if not shape:
        return itemsize(dtype)
    if any(d == 0 for d in shape):
        return 0
    return (1 + sum((d - 1) * s for d, s in zip(shape, strides))) * itemsize(dtype)


def is_contiguous(shape: list[int], strides: list[int]) -> bool:
    """Whether ``strides`` (in elements) lay ``shape`` out in C order with no gaps (size-1 axes may have any stride)."""
    expect = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != expect:
            return False
        expect *= d
    return True


def round_to(values: np.ndarray, dtype: str) -> np.ndarray:
    """float64 values rounded to ``dtype`` (nearest, ties to even), back in float64: by exponent and
    mantissa arithmetic (verify/rounding.py), bit for bit what the encoders below give."""
    from claimbench.verify.rounding import round_values

    try:
        return round_values(values, dtype)
    except ValueError:
        raise CodecError(f"cannot round to {dtype!r}") from None


def encode_bfloat16(x: np.ndarray) -> np.ndarray:
    """float64 -> bfloat16 bits (uint16), through float32, rounding to nearest even."""
    with np.errstate(over="ignore", invalid="ignore"):
        bits = np.asarray(x, dtype=np.float64).astype(np.float32).view(np.uint32).astype(np.uint64)
    nan = np.isnan(np.asarray(x, dtype=np.float64))
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    out[nan] = 0x7FC0
    return out


def encode_fp8(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 -> the nearest finite 8-bit code (ties to the even code); out of range saturates."""
    table = fp8_table(dtype)
    finite = np.isfinite(table)
    codes = np.nonzero(finite)[0]
    vals = table[codes]
    order = np.argsort(vals, kind="stable")
    vals, codes = vals[order], codes[order]
    # drop the negative zero so that 0.0 maps to the +0 code
    keep = ~((vals == 0) & (codes & 0x80).astype(bool))
    vals, codes = vals[keep], codes[keep]
    with np.errstate(over="ignore", invalid="ignore"):  # through float32, as torch casts (round_values too)
        x = np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64)
    clipped = np.clip(np.nan_to_num(x, nan=0.0), vals[0], vals[-1])
    hi = np.clip(np.searchsorted(vals, clipped), 1, len(vals) - 1)
    lo = hi - 1
    dlo, dhi = clipped - vals[lo], vals[hi] - clipped
    pick_hi = (dhi < dlo) | ((dhi == dlo) & ((codes[hi] & 1) == 0))
    out = np.where(pick_hi, codes[hi], codes[lo]).astype(np.uint8)
    nan_code = np.nonzero(np.isnan(table))[0][0]
    out[np.isnan(x)] = nan_code
    return out


def encode_element(value: float, dtype: str) -> bytes:
    """One element's bytes in ``dtype`` (for the per-sample perturbation)."""
    x = np.array([value], dtype=np.float64)
    if dtype == "bfloat16":
        return encode_bfloat16(x).tobytes()
    if dtype in ("float8_e4m3fn", "float8_e5m2"):
        return encode_fp8(x, dtype).tobytes()
    if dtype in ("float64", "float32", "float16"):
        return x.astype(STORAGE[dtype][1]).tobytes()
    raise CodecError(f"cannot encode a {dtype} element")
