"""NCCL all-reduce against reduce-then-broadcast: the same sum, with the links used half as well.

List entry: *NCCL*. Source for how collectives are counted: nccl-tests, doc/PERFORMANCE.md,
section "Bus bandwidth" (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
algbw = S / t, and for AllReduce busbw = algbw * 2(n-1)/n, because a ring all-reduce of S bytes
over n ranks has every rank send (and receive) 2(n-1)/n * S bytes: (n-1)/n * S in its
reduce-scatter half and as much again in its all-gather half. busbw is the number to hold against
a link's bandwidth, whatever n is. The claim's `workload.bytes` is exactly that per-rank traffic,
so the record's bytes / kernel median is the bus bandwidth nccl-tests would print. The inputs,
the baseline and the float64 reference are in ``task.py``.

The kernel is `torch.distributed.all_reduce` (NCCL on GPUs, gloo on CPU). The baseline computes
the same function with the two most obvious collectives: `reduce` to rank 0, then `broadcast`
from rank 0. Both are pipelined chains in NCCL, so each moves S bytes over every link in one
direction; run one after the other, they take 2 * S / B on links of B bytes/s per direction.

Why the kernel should be faster (implementer-report; derivation of `claimed.value`):
- n = 2 ranks, S = 2^26 float32 = 256 MiB. Ring all-reduce: each rank sends 2(n-1)/n * S = S
  bytes, and both directions of the link carry S at the same time, so t_k = S / B.
  Reduce + broadcast: S one way, then S the other way, so t_b = 2 * S / B. Link-bound speedup:
  n / (n - 1) = 2.
- Both sides pay the same out-of-place copy (a collective here works in place, and a kernel must
  return a tensor it allocated and leave its inputs alone): 2 * S bytes of HBM traffic, read plus
  written, at the 4.3 TB/s copy rate measured on one H200. Against the link time S / B that is
  c = 2 * B / 4.3 TB/s. Speedup = (2 + c) / (1 + c), which falls as B rises. B, the achieved
  link bandwidth per direction, is what only the GPUs can measure (nccl-tests prints it as
  busbw); it cannot exceed the links' signalling rate, 450 GB/s per direction for NVLink 4 on
  H100/H200 SXM, so c <= 2 * 450 / 4300 = 0.21 and the speedup is at least 2.21 / 1.21 = 1.83.
  Over PCIe (B near 50 GB/s) c is 0.02 and the ratio is 1.98. (The 450 GB/s is used only as an
  upper bound, where a vendor figure errs on the claim's safe side; no number is claimed from it.)
- Claimed: 1.8, tolerance 0.1. The metric is the speedup over reduce + broadcast, not busbw: the
  record's bytes / kernel median gives the bus bandwidth nccl-tests would print, recorded, not
  claimed (no measured H200 link rate exists to claim it against).
The reference gathers every rank's input in float64 and sums locally: a different algorithm,
in a higher precision. Nothing runs at import.
"""

from __future__ import annotations

import torch.distributed as dist


def nccl_allreduce(x):
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out
