"""Batch-invariant RMSNorm on CPU, against torch's default (list entry: Defeating Nondeterminism in
LLM Inference).

Mechanism. A floating-point sum depends on the order of its additions. An inference server's
answer for one request must not depend on which other requests share its batch, so every row's
reduction must be done in the same order whatever the batch size. Library reductions do not
promise this: their split across threads and vector lanes is chosen from the tensor's shape
(the blog's point, for GPU kernels). Here the sum of squares of a row is built only from
elementwise operations, whose result per element is fixed by IEEE rounding whatever the shape,
threading or vector width:
- chunks of LANES = 256 columns are added left to right into a (rows, 256) accumulator;
- then a fixed pairwise tree folds the 256 lanes (128, 64, ..., 1).
So row i's output is bit-identical whether it is normalized alone or inside any batch, on any
thread count (property ``batch-invariant``, and ``deterministic``).

Cost, and the claimed value (implementer-report). rows = 1024, hidden = 4096, float32 (16 MB,
larger than the L2 and half the 32 MB L3 of the machine measured here). Counting sweeps over a
rows x hidden array:
- ours: the chunk loop reads x once (its (rows, 256) temporaries stay in L2), x * r reads and
  writes, * weight reads and writes: 5 sweeps, plus about 30 small torch calls (~5 us each);
- torch 2.13's ``rms_norm`` on CPU is composite (pow, mean, add, rsqrt, mul, mul; checked with
  the profiler): 7 sweeps; a fused default would need 2-3.
So ours should run at 3/5 to 7/5 of the default's speed, minus the call overhead (~0.15 ms
against ~2 ms). Claimed: speedup 0.5 (tolerance 0.2), i.e. batch invariance costs at most about
2x here, even against a fused default. Measured on the 2-core machine this was written on:
0.7-1.3 when quiet (last run: 4.8 ms against 6.0 ms, median 1.25); with other jobs on the cores, medians fell to 0.16-0.85, because each of the
~40 small parallel torch calls waits for both cores (the default makes 6 large ones).
Measured on more than one machine: AMD EPYC quiet 0.97-1.14, CI half-widths 6-10% in 10 s (under
the 5% precision rule it needs about 2.5x the rounds there); Intel Xeon (family 6 model 207) busy
1.1-1.7 (best-of, single thread); another 2-core x86, busy: 2.68 [0.54, 4.02] (issue 13). The claim
of 0.5 holds on all three; its value moves between machines, so only a narrow CI publishes.
"""

from __future__ import annotations

import torch

from kernels.batch_invariant.task import EPS

LANES = 256


def _sum_squares_fixed_order(x: torch.Tensor) -> torch.Tensor:
    """Row sums of x*x in an order fixed by the column count alone (elementwise ops only)."""
    rows, hidden = x.shape
    lanes = min(LANES, hidden)
    head = x[:, :lanes]
    acc = head * head
    tmp = torch.empty_like(acc)
    for start in range(lanes, hidden, lanes):
        chunk = x[:, start:start + lanes]
        width = chunk.shape[1]
        torch.mul(chunk, chunk, out=tmp[:, :width])
        acc[:, :width].add_(tmp[:, :width])
    width = lanes
    while width > 1:
        half = (width + 1) // 2
        folded = acc[:, :width - half] + acc[:, half:width]
        acc = torch.cat([folded, acc[:, width - half:half]], dim=1) if 2 * half != width else folded
        width = half
    return acc[:, 0]


def batch_invariant_rms_norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Kernel: RMSNorm whose per-row result does not depend on the number of rows."""
    hidden = x.shape[-1]
    # sqrt and division are correctly rounded in every code path; a vectorized rsqrt need not
    # match the scalar one used for a vector's tail, which would tie a row's bits to its index.
    inv = 1.0 / torch.sqrt(_sum_squares_fixed_order(x) / hidden + EPS)
    out = x * inv[:, None]
    out.mul_(weight)
    return out
