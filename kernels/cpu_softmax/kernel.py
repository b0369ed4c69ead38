"""Fused softmax on CPU against eager softmax with materialized intermediates: fusion moves a
bandwidth-bound op up the roofline.

List entry: *Roofline: An Insightful Visual Performance Model*. The claim measures what the
model predicts for a memory-bound op whose bytes drop fourfold: ATen's fused CPU softmax (what
``torch.softmax`` runs for the last dimension) against the eager version with one full-size
intermediate per step (``task.naive_softmax``). The byte counts are the Triton fused-softmax
tutorial's ("Motivations"), which is where this comparison is usually taught; the kernel here is
not Triton, and the claim sits under the roofline because bytes over bandwidth is the mechanism.

Mechanism. Eager ``exp(x - max) / sum`` runs one full sweep per operation and writes each
intermediate to memory. The tutorial counts it for M x N: the naive version reads 5MN + 2M
elements and writes 3MN + 2M, where a fused kernel that keeps each row on chip reads MN and
writes MN. On a CPU, "on chip" is the L1/L2 cache: ATen's kernel takes one row at a time (16 KB
here), finds its maximum, writes exp(x - max) to the output while summing it, and scales the
output, all while the row sits in cache, in one parallel loop over rows. DRAM sees x read once and
the output written once; the exp count is the same as the naive version's.

A hand-written blocked version in Python (a loop over row blocks sized for L2, five torch calls
each) was tried first and dropped: its hundreds of small parallel regions collapse when the cores
are shared (2.4 s per call against 0.17 s for the naive version under load on the 2-core machine
this was written on), which a CI runner cannot rule out.

The model, and the claimed value (implementer-report). rows = 1024, cols = 16384, float32: a
64 MB input, twice this VM's 32 MB L3, so every sweep of either version comes from DRAM.
- naive: amax (read), x - m (read, write), exp (read, write), sum (read), e / s (read, write):
  8 sweeps, from DRAM once each intermediate is past the L3; fused: 2 sweeps. Both compute the
  same exps.
- with S the time of one sweep and E the time of the exps, the speedup is (E + 8S) / (E + 2S):
  4 when exp is free, 2.2 at E = 3S, 1.5 at E = 10S.
- measured at cols = 4096 on the 2 cores here when quiet (inputs warm, before the harness swept
  the caches): fused 1.4 ms, naive 4.5 ms; E + 2S = 1.4 and E + 8S = 4.5 give S = 0.52 ms and
  E = 0.37 ms, E about 0.7 S, and the model gives (0.7 + 8) / (0.7 + 2) = 3.2.
Claimed 1.5 (tolerance 0.2): it holds on any machine whose exps cost less than about ten sweeps,
far from the 0.7 sweeps seen here. Measured here at cols = 16384 with cold inputs (below): 3.25
[95% CI half-width 5.3%], 2026-12-06, one process, AMD EPYC (2 cores).

Why the claim's point moved from cols = 4096 to 16384 (2026-12-06). Each timed sample now starts
from inputs just rewritten (a sign flip over every element) and read back to memory (the harness
reads a buffer twice the LLC before each sample), so no kernel can update a kept answer and no
sample starts warmer than another. At 4096 the input is 16 MB: it used to sit in the L3 from the
previous call, which made the fused kernel 2.2 ms against the naive 5.0 ms (2.1-2.3x, two runs).
Read from DRAM, the fused kernel took 4.45-4.53 ms and the naive one 4.80-5.16 ms: 1.05 [0.87,
1.17] and 1.06 [0.96, 1.31], because the naive version's 16 MB intermediates still fit in the L3
and its extra sweeps are cache sweeps. At 16384 they do not, which is the model's case: fused
21.1 ms, naive 67.9 ms, 3.25x, the model's 3.2.
Measured before on more than one machine (warm inputs, the point at 4096): AMD EPYC (2 cores)
quiet 2.58-3.21; Intel Xeon (family 6 model 207, 2 vCPUs) busy 2.35-2.78; another 2-core x86,
busy 4.84 [3.99, 5.28] (issue 13). At 16384 with warm inputs: 3.278 [3.074, 3.532] (2026-12-03),
the same as cold, as a DRAM-bound point should be.

The sweep (cols 1024, 4096, 16384 at rows 1024; the verdict stands on 16384 alone). At cols = 1024
the input is 4 MB and the naive version's whole working set 16 MB, inside a 32 MB L3, so its eight
sweeps run at cache bandwidth and the gap narrows; 4096 is the same case for the intermediates.
Each point is recorded, none is published.
"""

from __future__ import annotations

import torch


def fused_softmax(x: torch.Tensor) -> torch.Tensor:
    """Kernel: ATen's fused CPU softmax, one row at a time in cache."""
    return torch.softmax(x, dim=-1)
