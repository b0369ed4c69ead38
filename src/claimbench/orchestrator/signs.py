"""The dense part of a timed sample's change: the sign of about half of every element, drawn anew.

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

from typing import Iterator

import numpy as np

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
# elements per step: the mask of one step (one byte per element at most) stays in a core's L2, so
# writing the change leaves the input where a read would have left it in the caches. One mask for
# the whole input (the first version: about 10 bytes per element, 40 MB for a 16 MB input, more
# than this VM's 32 MB L3) pushed the input out of the caches before the timed call, and an honest
# memory-bound claim measured a different regime (cpu-softmax-fused-vs-naive: 1.90x -> 0.89x).
CHUNK = 1 << 16


def sign_chunks(seed: int, n: int, size: int, *, chunk: int = CHUNK) -> Iterator[tuple[int, np.ndarray]]:
    """(start, mask) for ``n`` elements of ``size`` bytes, ``chunk`` at a time: each mask holds the
    sign bit where that element flips, else 0, from one bit of numpy's PCG64 per element. Every
    process that applies a flip draws it with this, so they agree byte for byte; any ``chunk``
    that is a multiple of CHUNK draws the same stream (whole 32-bit words per step), so a device
    side may take bigger steps to launch fewer copies."""
    if chunk % CHUNK:
        raise ValueError(f"a chunk of {chunk} elements is not a multiple of {CHUNK}")
    kind = _UNSIGNED[size]
    shift = kind(8 * size - 1)
    rng = np.random.default_rng(seed)
    for start in range(0, n, chunk):
        count = min(chunk, n - start)
        bits = np.unpackbits(np.frombuffer(rng.bytes((count + 7) // 8), np.uint8), count=count)
        mask = bits.astype(kind) if size > 1 else bits
        mask <<= shift
        yield start, mask


def flip_bytes(view: np.ndarray, seed: int, size: int) -> None:
    """Flip the chosen elements' signs in place in a uint8 view of a C-order input of ``size``-byte elements."""
    words = view.view(_UNSIGNED[size])
    for start, mask in sign_chunks(seed, words.size, size):
        part = words[start:start + mask.size]
        np.bitwise_xor(part, mask, out=part)
