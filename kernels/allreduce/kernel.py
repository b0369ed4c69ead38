"""NCCL all-reduce against reduce-then-broadcast: the same sum, with the links used half as well.

List entry: *NCCL*. Source for how collectives are counted: nccl-tests, doc/PERFORMANCE.md,
section "Bus bandwidth" (https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md):
algbw = S / t, and for AllReduce busbw = algbw * 2(n-1)/n, because a ring all-reduce of S bytes
over n ranks has every rank send (and receive) 2(n-1)/n * S bytes: (n-1)/n * S in its
reduce-scatter half and as much again in its all-gather half. busbw is the number to hold against
a link's bandwidth, whatever n is. The claim's `workload.bytes` is exactly that per-rank traffic,
so the record's bytes / kernel median is the bus bandwidth nccl-tests would print.

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
  return a tensor it allocated and leave its inputs alone): 2 * S bytes of HBM traffic, at
  ~4.8 TB/s against B ~ 450 GB/s per direction of NVLink 4 (H100/H200 SXM) that is
  c = 2 * 450 / 4800 ~ 0.19 of S / B. Speedup = (2 + c) / (1 + c) ~ 1.84.
- Claimed: 1.8, tolerance 0.1. Over PCIe the links are full duplex as well, so the ratio holds;
  only the absolute busbw changes, and it is recorded, not claimed.
The reference gathers every rank's input in float64 and sums locally: a different algorithm,
in a higher precision. Nothing runs at import.
"""

from __future__ import annotations

import torch.distributed as dist


def nccl_allreduce(x):
    out = x.clone()
    dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out
