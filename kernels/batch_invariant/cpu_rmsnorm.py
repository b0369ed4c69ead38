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
against ~2 ms).
Measured on the 2-core machine this was written on: 0.7-1.3 when quiet (last run: 4.8 ms against
6.0 ms, median 1.25); with other jobs on the cores, medians fell to 0.16-0.85, because each of the
~40 small parallel torch calls waits for both cores (the default makes 6 large ones); such runs
end `inconclusive` (machine busy). On more than one machine, the records under results/records:
AMD EPYC quiet 1.139 [1.011, 1.231], 1.141 [1.044, 1.182], 0.969 [0.890, 1.020]; Intel Xeon
1.071 [0.925, 1.237] and 1.001 [0.850, 1.064] (inconclusive, CI too wide); an earlier busy Xeon
(family 6 model 207) 1.1-1.7 best-of, single thread.
Claimed: speedup 0.8, tolerance 0.2, so the threshold is 0.8 x (1 - 0.2) = 0.64: the lowest CI
bound recorded on any machine (0.850) and the lowest quiet median (0.7) stand above it, the
range the sweep count allows (3/5 = 0.6 at worst, before the default's extra sweeps) barely
below it. It was 0.5 (threshold 0.4), which every record beat by 2x: a claim must say what the
kernel does, not a floor nothing comes near (issue 24).
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
