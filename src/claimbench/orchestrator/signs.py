"""The dense part of a timed sample's change: about half of every input's elements, drawn anew
(a float's sign or mantissa, an integer's value one step within its range, the ends of rows in order).

The sparse part (`perturb.spread`: every index of every axis, a few thousand elements) forces an
incremental update to touch every row and column, but work linear in its input can still apply
it cheaply: a matmul kernel keeping its last A, B and C added dA B + A dB in O(n^2) for an O(n^3)
product, and every recheck passed (`delta_matmul`: verified 1.81x, 2026-12-06). Flipping the
sign of a random half of all elements changes the input everywhere: (A * S) B shares nothing
with A B that a kernel could reuse, a reduction's total changes, and the magnitudes (the input's
distribution) stay. The mask is described by a seed, so an edit stays small on the wire; every
process that applies it (the orchestrator to its own pages, a CUDA side to its device copies, the
task side before a reference) draws the same bytes from numpy's PCG64.
"""

from __future__ import annotations

from typing import Iterator, Optional

import numpy as np

from claimbench.verify import codec

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# elements per step: the mask of one step (one byte per element at most) stays in a core's L2, so
# writing the change leaves the input where a read would have left it in the caches. One mask for
# the whole input (the first version: about 10 bytes per element, 40 MB for a 16 MB input, more
# than this VM's 32 MB L3) pushed the input out of the caches before the timed call, and an honest
# memory-bound claim measured a different regime (cpu-softmax-fused-vs-naive: 1.90x -> 0.89x).
CHUNK = 1 << 16


# per floating-point dtype: (exponent field, the mantissa's top bit), in the element's own width
FIELDS = {
    "float64": (0x7FF0000000000000, 1 << 51), "float32": (0x7F800000, 1 << 22),
    "float16": (0x7C00, 1 << 9), "bfloat16": (0x7F80, 1 << 6),
    "float8_e4m3fn": (0x78, 1 << 2), "float8_e5m2": (0x7C, 1 << 1),
}


def float_passes(mantissa: bool) -> tuple[tuple[bool, int], ...]:
    """(on the mantissa, stream) of each pass of a floating-point input's change, in order: with ``mantissa`` (an
    input with no negative value) the mantissa's top bit alone; else the sign, then the mantissa's top
    bit from a second stream. The sign alone left |x| and x*x as they were: a kernel keeping A*A, B*B
    and (A*A)(B*B) applied the sparse changes only (verified 2.06x), and a sort of magnitudes replayed
    its answer (20.7x; an adversarial review, 2026-12-06). The mantissa's bit is `FIELDS`'s."""
    return ((True, 0),) if mantissa else ((False, 0), (True, 1))


def sign_chunks(seed: int, n: int, size: int, *, chunk: int = CHUNK, bit: Optional[int] = None,
                stream: int = 0) -> Iterator[tuple[int, np.ndarray]]:
    """(start, mask) for ``n`` elements of ``size`` bytes, ``chunk`` at a time: each mask holds the
    flipped bit (the sign, or ``bit``) where that element flips, else 0, from one bit of numpy's
    PCG64 per element. Every process that applies a flip draws it with this, so they agree byte for
    byte; any ``chunk`` that is a multiple of CHUNK draws the same stream (whole 32-bit words per
    step), so a device side may take bigger steps to launch fewer copies."""
    if chunk % CHUNK:
        raise ValueError(f"a chunk of {chunk} elements is not a multiple of {CHUNK}")
    kind = _UNSIGNED[size]
    shift = kind(8 * size - 1 if bit is None else bit.bit_length() - 1)
    rng = np.random.default_rng(seed if stream == 0 else [seed, stream])  # ``stream``: another pass's own draw
    for start in range(0, n, chunk):
        count = min(chunk, n - start)
        bits = np.unpackbits(np.frombuffer(rng.bytes((count + 7) // 8), np.uint8), count=count)
        mask = bits.astype(kind) if size > 1 else bits
        mask <<= shift
        yield start, mask


def flip_bytes(view: np.ndarray, seed: int, dtype: str, *, mantissa: bool = False,
               low: Optional[tuple[int, int]] = None) -> None:
    """Change the chosen elements in place in a uint8 view of a C-order input of ``dtype``: their sign
    (an infinity or a NaN keeps its own: a mask's -inf stays -inf), then (`float_passes`) the top bit
    of the mantissa of those whose exponent is not all ones, and for a subnormal value only where a
    lower bit is set (a zero stays zero, no value becomes a zero, and no finite value an infinity or
    a NaN; subnormals were left out once, and an input of subnormals got its signs flipped only,
    which an answer through x*x does not see: 1.89x verified, an adversarial review). With
    ``mantissa`` (an input with no negative value) the mantissa alone: it stays non-negative and a
    normal value in its binade, so a scale or a probability keeps its meaning while every element may
    change by a quarter to a half of itself. An integer or boolean input: `change_ints`."""
    if dtype not in FIELDS:
        if low is None:
            raise ValueError("an integer input's change needs its range")
        change_ints(int_view(view, dtype), seed, low=low)
        return
    exp, top = FIELDS[dtype]
    size = codec.itemsize(dtype)
    words = view.view(_UNSIGNED[size])
    kind = _UNSIGNED[size]
    for on_mantissa, stream in float_passes(mantissa):
        for start, mask in sign_chunks(seed, words.size, size, bit=top if on_mantissa else None, stream=stream):
            part = words[start:start + mask.size]
            field = part & kind(exp)
            if on_mantissa:  # a normal value, or a subnormal one that keeps a bit below the top (never a zero made)
                mask *= (field != kind(exp)) & ((field != 0) | ((part & kind(top - 1)) != 0))
            else:
                mask *= field != kind(exp)
            np.bitwise_xor(part, mask, out=part)


def change_ints(values: np.ndarray, seed: int, *, low: tuple[int, int]) -> None:
    """An integer or boolean input, in place (``values``: its elements, C-order): a random half of
    its elements move one step within ``low`` = (smallest, largest): up by one, or down by one where
    the value is the largest, so every one of them changes unless the input holds one value only
    (`perturb.constant` refuses that). The values do not keep their multiset: a shuffle that kept it
    let a sort, a histogram or a top-k replay its answer keyed on order-free sums (8.4x, an
    adversarial review), and barely moved values that repeat (a mostly-zero matrix, about 1%)."""
    lo, hi = low
    one = np.array(1, values.dtype)
    for start, mask in sign_chunks(seed, values.size, values.dtype.itemsize, bit=1):
        part = values[start:start + mask.size]
        chosen = np.flatnonzero(mask)
        got = part[chosen]
        part[chosen] = np.where(got < hi, got + one, np.where(got > lo, got - one, got))


def sorted_rows(values: np.ndarray, row: int) -> bool:
    """Whether every row of ``row`` elements (the last axis) is non-decreasing and longer than one:
    offsets and lengths in order, which a step of single elements would break."""
    if row < 2 or not values.size:
        return False
    rows = values.reshape(-1, row)
    return bool(np.all(rows[:, 1:] >= rows[:, :-1]))


def shift_sorted(values: np.ndarray, row: int, shift: tuple[int, int]) -> None:
    """An input whose rows are in order: elements before ``shift[0]`` of every row move down by one
    and those from ``shift[1]`` on up by one, each within its row's own smallest and largest value. A row stays
    in order with its ends where they were (offsets keep their 0 and their total), and nearly every
    element changes."""
    p, q = shift
    rows = values.reshape(-1, row)  # a bool input comes as its bytes (int_view), as in a side's torch copy
    lo, hi = rows.min(axis=1, keepdims=True), rows.max(axis=1, keepdims=True)
    # only elements above the row's smallest move down and below its largest move up: ``lo + 1`` and
    # ``hi - 1`` wrapped where a row was constant at its dtype's end (an all-False row of a bool
    # mask became True in the sides' copies and stayed False in the orchestrator's)
    head, tail = rows[:, :p], rows[:, q:]
    head -= (head > lo).astype(rows.dtype)
    tail += (tail < hi).astype(rows.dtype)


def int_view(view: np.ndarray, dtype: str) -> np.ndarray:
    """An integer or boolean input's bytes as numbers (a bool as its byte, so it can step by one)."""
    return view.view(np.uint8 if dtype == "bool" else codec.STORAGE[dtype][1])
