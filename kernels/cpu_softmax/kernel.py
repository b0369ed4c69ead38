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

The model, and the claimed value (implementer-report). rows = 1024, cols = 4096, float32: a
16 MB input, larger than L2 and, with the naive version's three 16 MB intermediates, twice a
32 MB L3.
- naive: amax (read), x - m (read, write), exp (read, write), sum (read), e / s (read, write):
  8 sweeps of 16 MB, mostly from DRAM; fused: 2 sweeps. Both compute the same 4M exps.
- with S the time of one sweep and E the time of the exps, the speedup is (E + 8S) / (E + 2S):
  4 when exp is free, 2.2 at E = 3S, 1.5 at E = 10S.
- measured on the 2 cores here when quiet: fused 1.4 ms, naive 4.5 ms. Solving E + 2S = 1.4 and
  E + 8S = 4.5 gives S = 0.52 ms and E = 0.37 ms: E is about 0.7 S (vectorized exps are cheap
  next to a DRAM sweep), and the model gives (0.7 + 8) / (0.7 + 2) = 3.2, as measured (3.1).
Claimed 1.5 (tolerance 0.2): it holds on any machine whose exps cost less than about ten sweeps,
far from the 0.7 sweeps seen here, so a shared or slower CPU does not refute it. Measured here:
3.1 (median) when quiet; 2.6-4.6 with other jobs on the cores (runs shared with other jobs, not
results).
Measured on more than one machine: AMD EPYC (2 cores) quiet 2.58-3.21; Intel Xeon (family 6 model
207, 2 vCPUs) busy 2.35-2.78 (best-of, single thread); another 2-core x86, busy: 4.84 [3.99, 5.28]
(issue 13); all above the 1.2 threshold.

The sweep (cols 1024, 4096, 16384 at rows 1024; the verdict stands on 4096 alone). The model
predicts where fusion pays most: at cols = 1024 the input is 4 MB and the naive version's whole
working set (input, three intermediates) 16 MB, inside a 32 MB L3, so its eight sweeps run at
cache bandwidth and the gap narrows; at 16384 the input is 64 MB, every sweep comes from DRAM, and
with E = 0.7 S as above the model gives 3.2 again. Measured on the 2-core AMD EPYC here
(2026-12-03, two runs of `claimbench run`, three processes each, not quiet: the claim's own point
gave 1.575 [1.205, 2.133] and 1.285 [1.133, 2.246] where it gave 3.1 quiet): cols 1024 1.877
[1.703, 2.101] and 1.899 [1.076, 2.067]; cols 16384 3.278 [3.074, 3.532] (the first run's 16384
point found a bug in the harness instead: a 64 MB call "kept 2.41 cores busy" of 2, counted over
its timed calls only). The 16384 figure is the model's; the 1024 one is below the DRAM-bound
points, as the cache argument says. Each point is recorded, none is published.
"""

from __future__ import annotations

import torch


def fused_softmax(x: torch.Tensor) -> torch.Tensor:
    """Kernel: ATen's fused CPU softmax, one row at a time in cache."""
    return torch.softmax(x, dim=-1)
