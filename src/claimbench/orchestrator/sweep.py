"""CPU: the caches swept before each timed sample, so every sample starts from the same state.

Each CPU sample's inputs are rewritten just before it (a sign flip over every element,
`signs.py`), or work linear in its inputs could update a kept answer instead of redoing it. A
rewrite leaves the inputs dirty in the orchestrator's core, and what that costs the next call
depends on the kernel: torch's fused CPU softmax went from 2.2 ms to 3.6-5.3 ms (noisy) while the
naive version stayed at 5.0 ms (1024x4096 float32, a 2-core EPYC VM, 2026-12-06). Reading a buffer
twice the last-level cache after the rewrite writes the inputs back and leaves them in memory, the
same for both sides and every sample: the fused kernel then took 4.06-4.08 ms and the naive one
4.96-5.07 ms in two runs. This is nvbench's cold measurement (an L2 flush before each sample) on
a CPU, and it is what a claim's byte count means: inputs read from DRAM. `--hot` skips it.
"""

from __future__ import annotations

import glob
from typing import Optional

import numpy as np

FALLBACK_BYTES = 64 << 20        # when sysfs names no cache: twice a large desktop L3
MAX_BYTES = 1 << 30              # a sweep costs time per sample: never more than this
_KEPT: dict[int, np.ndarray] = {}  # the last buffer made, by size: reused by the next claim process


def last_level_bytes(root: str = "/sys/devices/system/cpu/cpu0/cache") -> Optional[int]:
    """The largest cache sysfs lists for CPU 0, in bytes, or None."""
    sizes = []
    for path in glob.glob(f"{root}/index*/size"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
        digits = text[:-1] if scale != 1 else text
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


class CacheSweep:
    """A buffer twice the last-level cache, read through before each sample (reads leave no dirty
    lines of ours for the kernel to write back)."""

    def __init__(self, nbytes: Optional[int] = None) -> None:
        llc = last_level_bytes()
        size = nbytes if nbytes is not None else (2 * llc if llc else FALLBACK_BYTES)
        self.nbytes = max(1 << 20, min(MAX_BYTES, size)) // 8 * 8
        self.buf = _buffer(self.nbytes)
        self.sweeps = 0

    def __call__(self) -> None:
        np.bitwise_or.reduce(self.buf)
        self.sweeps += 1


def _buffer(nbytes: int) -> np.ndarray:
    """The sweep's buffer, made once per size in this process: writing 64 MB of fresh pages cost 0.1 s
    of CPU per claim process (a tenth of a small claim's orchestrator time under cProfile, and
    `tests/test_fresh_timed_calls.py` went from 121 to 109 CPU-s). Only read after it is made, so a
    kept one is the same as a new one; the last size alone is kept (one orchestrator sweeps for one
    machine)."""
    buf = _KEPT.get(nbytes)
    if buf is None:
        _KEPT.clear()
        buf = _KEPT[nbytes] = np.ones(nbytes // 8, np.uint64)  # written once, so every page is really there
    return buf
