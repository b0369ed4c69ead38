"""Row-parallel linear layer on two GPUs: half the GEMM on each, then one all-reduce.

List entry: *Megatron-LM*. Megatron's tensor parallelism splits a transformer MLP's first weight
by columns and its second by rows (paper, section 3, Figure 3a), so the second GEMM's contraction
dimension K is split across the GPUs: each computes a partial product of the full output shape,
and a single all-reduce sums them. This kernel is that second half: ``x_r @ w_r`` on this rank's
shard (cuBLAS), then ``all_reduce`` (NCCL) in place on the result. The baseline is the same layer
computed whole on one GPU (``task.full_linear``): what tensor parallelism buys for one layer.

Workload: an 8192-token prefill through a 70B-class MLP's down-projection, M = 8192 tokens,
K = 28672 (the MLP width), N = 8192 (the model width), bf16, 2 GPUs.

Derivation of the claimed speedup (implementer report; facts in docs/sources.md).
* One GPU: 2 * 8192 * 28672 * 8192 = 3.85e12 FLOP at the measured 790 TFLOP/s = 4.87 ms
  (compute-bound: 1900 FLOP per byte of X, W and Y).
* Tensor-parallel, per rank: half the FLOP, 2.44 ms, then an all-reduce of Y, S = 8192 * 8192 * 2 B
  = 134 MB. On 2 ranks a ring all-reduce sends and receives S per rank per direction, so it takes
  S / B with B the achieved link bandwidth per direction (nccl-tests' busbw). B is what only the
  GPUs can measure; it is at most 450 GB/s on NVLink 4 (0.30 ms, speedup 1.78).
* Speedup 4.87 / (2.44 + S / B). **Claimed 1.4**, tolerance 0.1: verified while S / B <= 1.43 ms,
  i.e. B >= 94 GB/s, a fifth of NVLink 4's signalling rate. The hardware names the SXM boards
  (NVLink through NVSwitch) and sets `nvlink: true`: over PCIe Gen5 (about 50-60 GB/s per
  direction) the claim would fail, so a machine whose GPUs report no active NVLink, or whose NVML
  does not say, is not this claim's machine and the claim is skipped there, not refuted.
The GEMM halves stay compute-bound (M and N unchanged, K halved: 1700 FLOP per byte), and the
all-reduce cannot overlap the GEMM here (Y is complete only when the GEMM ends); overlapping them
(as later Megatron versions do) would only raise the speedup.

On CPU the claim runs on 2 gloo ranks in float32: the shards, the all-reduce and the gathered
reference, at the check shapes. Only two GPUs measure the speed.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def row_parallel_linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Kernel: this rank's partial product, summed over the ranks in place."""
    y = torch.matmul(x, w)
    dist.all_reduce(y, op=dist.ReduceOp.SUM)
    return y
