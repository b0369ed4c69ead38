"""Fused softmax on CPU against eager softmax with materialized intermediates (list entry: Triton
tutorials, whose fused-softmax tutorial states the mechanism).

Mechanism. Eager ``exp(x - max) / sum`` runs one full sweep per operation and writes each
intermediate to memory. The Triton tutorial counts it for M x N: the naive version reads 5MN + 2M
elements and writes 3MN + 2M, where a fused kernel that keeps each row on chip reads MN and writes
MN, about 4x fewer bytes ("Motivations"). On a CPU, "on chip" is the L1/L2 cache: ATen's fused
softmax kernel (what ``torch.softmax`` runs on CPU for the last dimension) takes one row at a time
(16 KB here), finds its maximum, writes exp(x - max) to the output while summing it, and scales
the output, all while the row sits in L1/L2, in one parallel loop over rows. DRAM sees x read once
and the output written once; the exp count is the same as the naive version's.

A hand-written blocked version in Python (a loop over row blocks sized for L2, five torch calls
each) was tried first and dropped: its hundreds of small parallel regions collapse when the cores
are shared (2.4 s per call against 0.17 s for the naive version under load on the 2-core machine
this was written on), which a CI runner cannot rule out.

Why it wins, and the claimed value (implementer-report). rows = 1024, cols = 4096, float32: a
16 MB input, larger than L2 and, with the naive version's three 16 MB intermediates, twice a
32 MB L3.
- naive: amax (read), x - m (read, write), exp (read, write), sum (read), e / s (read, write):
  8 sweeps of 16 MB, mostly from DRAM; fused: 2 sweeps. Both compute the same 4M exps.
- with S the time of one sweep and E the time of the exps, the speedup is (E + 8S) / (E + 2S):
  4 when exp is free, 1.5 when E = 10 S.
- measured on the 2 cores here when quiet: fused 1.4 ms, nearly all of it exp (E ~ 1.3-1.4
  ms; 4M exps alone take 1.3-2.0 ms), naive 4.5 ms, so the naive version's 6 extra sweeps over
  fresh 16 MB buffers cost ~3 ms (S ~ 0.5 ms): E ~ 3 S, and the model gives ~3.
Claimed 1.5 (tolerance 0.2), which holds on any machine whose exps cost less than ten sweeps.
Measured here: 3.1 (median) when quiet; 2.6-4.5 with other jobs on the cores.
"""

from __future__ import annotations

import torch


def fused_softmax(x: torch.Tensor) -> torch.Tensor:
    """Kernel: ATen's fused CPU softmax, one row at a time in cache."""
    return torch.softmax(x, dim=-1)
