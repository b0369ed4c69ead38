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

from functools import lru_cache

import numpy as np

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def sign_bits(seed: int, n: int, size: int) -> np.ndarray:
    """``n`` unsigned integers of ``size`` bytes: the sign bit where that element flips, else 0."""
    top = np.frombuffer(np.random.default_rng(seed).bytes(n), np.uint8) & np.uint8(0x80)
    if size == 1:
        return top.copy()
    kind = _UNSIGNED[size]
    return top.astype(kind) << kind(8 * size - 8)


def flip_bytes(view: np.ndarray, seed: int, size: int) -> None:
    """Flip the chosen elements' signs in a uint8 view of a C-order input of ``size``-byte elements."""
    words = view.view(_UNSIGNED[size])
    np.bitwise_xor(words, _last_bits(seed, words.size, size), out=words)


@lru_cache(maxsize=1)
def _last_bits(seed: int, n: int, size: int) -> np.ndarray:
    """`sign_bits`, kept for the next call: on CPU the orchestrator writes each edit into the
    kernel's pages, then into the baseline's, and drawing the mask is most of the cost."""
    bits = sign_bits(seed, n, size)
    bits.flags.writeable = False
    return bits
