"""Which input elements change before each timed kernel call, and to what.

A timed call must be as fresh as a checked one: a kernel that keeps a copy of its last inputs and
recomputes only what changed must pay for the work it claims. One changed element per sample did
not ensure that (a matmul kernel recomputing one row and one column of its output was verified at
2.4x). The rule here changes, in every floating-point input, a set of elements that meets every
index of every axis and every combination of the leading axes' indices, up to a budget, at least
once (`spread`, up to MAX_SPREAD elements). The argument (docs/threats.md):

- an output element that depends on a whole row, column or slice of an input (a contraction, a
  reduction, attention over keys) has a changed element in that slice, so every such output must
  be recomputed: an incremental update costs as much as the work;
- for an elementwise or bandwidth-bound kernel, finding what changed means reading the whole input
  and comparing it with a saved copy, which costs at least the kernel's own traffic.

The elements are drawn by the orchestrator after the previous call returned, from its own
SystemRandom, so a kernel cannot predict them. New values are the chosen elements' own values
rotated among themselves (the input's distribution is kept: no negative scale where all were
positive), and an element of a floating-point input that would keep its value gets ``-old - 1``
instead, so each one changes.

Integer inputs change too: the sparse rotation keeps their values the same multiset (indices stay
in range, a permutation stays a permutation), and none is made where their rows are in order
(offsets), which a rotation would break. Before, a claim with no floating-point input kept its
inputs still within a round, and a kernel replaying the product it computed on the round's first
call was verified at 26.8x (an adversarial review, 2026-12-06).

The sparse part alone let work linear in its inputs apply the changes to a kept answer
(`delta_matmul`, 1.9x), so `plan_edit` adds a dense part, drawn per sample (`signs.py`): about
half of every input's elements change (signs or mantissas; for integers, a shift of rows in
order where it moves a quarter of them, else one step within the input's range).
"""

from __future__ import annotations

import random
from typing import Optional, Sequence

import numpy as np

from claimbench.orchestrator import messages as m
from claimbench.orchestrator.signs import flip_bytes, int_view, shift_sorted, sorted_rows
from claimbench.verify import codec

MAX_SPREAD = m.EDIT_MAX_ELEMENTS  # elements per input per sample: covers every axis of every shipped claim's inputs


ROWS_BUDGET = 1 << 12  # index combinations of the leading axes met in full (more would swell the per-sample edits)


WIRE_BUDGET = 3 << 20  # bytes of the channel's 4 MiB frame a checked sample's reference request may spend on edits


def spread_cap(itemsize: int, inputs: int, samples: int) -> int:
    """How many elements one input's spread may hold so that a round's edits (``samples`` kernel
    samples, ``inputs`` changed inputs, each element as hex of an int64 index and its bytes) fit
    WIRE_BUDGET: a checked sample's reference request carries all of them, and 32,768 elements of a
    1-D int64 input a sample, five samples a round, made a 5.2 MB frame (the claim ended `error`,
    an adversarial review). The dense part of each edit (`signs.py`) changes about half of every
    input whatever this cap is."""
    per_element = 2 * (8 + itemsize) * max(1, inputs) * max(1, samples)
    return max(1, min(MAX_SPREAD, WIRE_BUDGET // per_element))


def spread(shape: Sequence[int], rng: random.Random, cap: int = MAX_SPREAD) -> np.ndarray:
    """Flat (C-order) indices meeting every index of every axis, and every combination of indices
    of the longest run of leading axes (the last axis aside) that has at most ROWS_BUDGET of them,
    when none of these counts exceeds ``cap``; past it, ``cap`` elements on distinct indices.

    Combinations, not each leading axis alone: pairing every axis's permutation with one counter met
    every index of every axis but, on a decode query of shape (batch, heads, dim), only
    max(batch, heads) of the batch x heads rows, so a kernel keeping its last answer recomputed only
    the heads that changed (9.5x, an adversarial review, 2026-12-06). Every combination of all the
    leading axes would be 32,768 elements a sample on a (2, 8, 4096, 128) KV cache, and the
    edits a checked sample's reference carries outgrew the channel's frame; the budget keeps a
    sample's count at the longest axis there, as before."""
    dims = [int(d) for d in shape] or [1]
    if any(d == 0 for d in dims):
        return np.zeros(0, dtype=np.int64)
    k, rows = 0, 1
    while k < len(dims) - 1 and rows * dims[k] <= ROWS_BUDGET:
        rows *= dims[k]
        k += 1
    n = min(max([rows, *dims]), cap)
    gen = np.random.default_rng(rng.getrandbits(63))
    lead = np.unravel_index(_cycle(gen, rows, n), dims[:k]) if k else ()
    rest = tuple(_cycle(gen, d, n) for d in dims[k:])
    flat = np.ravel_multi_index((*lead, *rest), dims)
    return np.unique(flat.astype(np.int64))


def _cycle(gen: np.random.Generator, size: int, n: int) -> np.ndarray:
    """``n`` indices below ``size``: a random permutation repeated when ``size <= n``, else ``n`` distinct ones."""
    if size <= n:
        return gen.permutation(size).astype(np.int64)[np.arange(n) % size]
    return gen.choice(size, size=n, replace=False).astype(np.int64)


def new_values(current: np.ndarray, dtype: str) -> np.ndarray:
    """The chosen elements' replacement bytes, as a (k, itemsize) uint8 array: their values rotated
    by one place; where that keeps a value, ``-old - 1`` (1 where old is not finite)."""
    size = codec.itemsize(dtype)
    raw = np.ascontiguousarray(current).reshape(-1, size)
    if len(raw) == 0:
        return raw
    rotated = np.roll(raw, 1, axis=0)
    if dtype not in codec.FLOATING:  # the rotation alone: the same values, so every index stays valid
        return rotated
    same = np.all(rotated == raw, axis=1)
    if same.any():
        old = codec.from_bytes(raw[same].tobytes(), dtype, [int(same.sum())])
        repl = np.where(np.isfinite(old), -old - 1.0, 1.0)
        rotated = rotated.copy()
        rotated[same] = np.frombuffer(b"".join(codec.encode_element(float(v), dtype) for v in repl),
                                      np.uint8).reshape(-1, size)
    return rotated


def perturbable(items: Sequence, has_bytes: Sequence[bool]) -> list[int]:
    """The inputs changed before each timed kernel sample: every tensor with bytes, floating-point or
    not. Integer inputs beside floating-point ones used to stay: a float input the work never reads
    then turned every change off, and an int64 matmul behind one replayed its product at 22.6x."""
    return [i for i, it in enumerate(items) if isinstance(it, m.TensorItem) and has_bytes[i]]


def plan_edit(operand: int, item: m.TensorItem, view: np.ndarray, *, rng: random.Random, flip: bool = False,
              mantissa: bool = False, cap: int = MAX_SPREAD) -> m.Edit:
    """One input's edit for the next sample, from the bytes it holds now (``view``: uint8, C-order):
    the spread elements set to their own values of now, rotated among themselves (none for rows in
    order, which a rotation would break), then, with ``flip``, a dense change drawn at random over
    all of it (`signs`: a floating-point input's signs, or with ``mantissa`` its mantissas' top
    bits, for an input with no negative value; for an integer input, `_integer_change`)."""
    size = codec.itemsize(item.dtype)
    floating = item.dtype in codec.FLOATING
    row = int(item.shape[-1]) if item.shape else 1
    shift, low = None, None
    if flip and not floating and view.size:
        shift, low = _integer_change(int_view(view, item.dtype), row, rng)
    idx = np.zeros(0, np.int64) if shift else spread(item.shape, rng, cap)
    vals = new_values(view[byte_indices(idx, size)], item.dtype)
    seed = rng.getrandbits(63) if flip and view.size and not shift else None
    return m.Edit(operand=operand, indices=idx.astype("<i8").tobytes().hex(), raw=vals.tobytes().hex(), signs=seed,
                  mantissa=mantissa and floating and seed is not None, shift=shift, low=low)


ENOUGH = 0.25           # a shift of rows in order must move at least this share of an input's elements
PROBE_ELEMENTS = 1 << 20  # ...judged on the first this many (whole rows), so a big input costs little


def _integer_change(values: np.ndarray, row: int, rng: random.Random) -> tuple[Optional[tuple[int, int]], Optional[tuple[int, int]]]:
    """Which dense change an integer input gets, as (shift, low): where its rows are in order
    (offsets) and a shift keeping that order moves at least ENOUGH of its first PROBE_ELEMENTS
    (tried on a copy), the shift; else a random half of it moves one step within its range. Rows
    of 0s then 1s moved not at all under the shift: a claim could make an input sorted to keep it
    still."""
    low = (int(values.min()), int(values.max()))
    take = max(row, PROBE_ELEMENTS // max(row, 1) * row) if values.size > PROBE_ELEMENTS else values.size
    head = values[:take]
    if sorted_rows(head, row) and sorted_rows(values, row):
        p = rng.randrange(row // 2 + 1)
        shift = (p, rng.randrange(max(p, row // 2), row + 1))
        trial = head.copy()
        shift_sorted(trial, row, shift)
        if np.count_nonzero(trial != head) >= ENOUGH * head.size:
            return shift, None
    return None, low


def constant(item: m.TensorItem, raw: np.ndarray) -> bool:
    """Whether an integer or boolean input of two elements or more holds one value only: no change
    keeps it in its range and moves it, so a claim made this way would keep its inputs still (a
    replay of an int64 matmul of constant matrices); the run cannot be `verified` (rechecks)."""
    if item.dtype in codec.FLOATING or raw.size < 2 * codec.itemsize(item.dtype):
        return False
    values = int_view(raw, item.dtype)
    return bool(values.min() == values.max())


def signed(item: m.TensorItem, raw: np.ndarray) -> bool:
    """Whether a floating-point input holds a negative value (a set sign bit): only such an input's
    signs are flipped, since one that is all non-negative may mean something a sign would break (a
    scale, a length, a probability; `reduction-sum-cupy` sums uniform [0, 1) values)."""
    size = codec.itemsize(item.dtype)
    return item.dtype in codec.FLOATING and bool(raw.size) and bool(np.bitwise_or.reduce(raw[size - 1::size]) & 0x80)


def apply_to_bytes(view: np.ndarray, edit: m.Edit, size: int, *, dtype: str = "", row: int = 1) -> None:
    """Write an edit into a uint8 view of a C-order input of ``dtype`` (the orchestrator's own pages);
    an edit with a dense part needs ``dtype`` to find what it changes, and a shift its ``row``, the
    input's last dimension."""
    view[byte_indices(edit_indices(edit), size)] = np.frombuffer(bytes.fromhex(edit.raw), np.uint8)
    # the dense part last, in every process that applies an edit (side/tensors.set_elements too):
    # the sparse part's values were read before it
    if edit.signs is not None:
        flip_bytes(view, edit.signs, dtype, mantissa=edit.mantissa, low=edit.low)
    if edit.shift is not None:
        shift_sorted(int_view(view, dtype), row, edit.shift)


def edit_indices(edit: m.Edit) -> np.ndarray:
    """The flat element indices of ``edit``, decoded from its hex of little-endian int64."""
    return np.frombuffer(bytes.fromhex(edit.indices), "<i8")


def byte_indices(idx: np.ndarray, size: int) -> np.ndarray:
    """The byte offsets of elements ``idx`` of ``size`` bytes each, element after element."""
    return (idx[:, None] * size + np.arange(size)[None, :]).reshape(-1)
