"""The roofline's ceilings as claims: a copy in GB/s, a large GEMM in TFLOP/s, and fusion on CPU.

Entry: *Roofline: An Insightful Visual Performance Model* (Williams, Waterman and Patterson,
CACM 52(4), 2009). Attainable throughput is min(peak compute, bandwidth x arithmetic intensity).
The ceilings here are not vendor peaks but rates measured on the machine (docs/sources.md);
these claims state that our kernels reach them, or, for the CPU claim, that raising a
bandwidth-bound op's arithmetic intensity buys what the model predicts.

* Copy (this module): each element read once and written once, arithmetic intensity 0. The
  kernel is a flat Triton copy, 8192 elements per program; the baseline is ``x.clone()``
  (``task.py``). Workload 2^28 bf16 elements: 512 MiB read plus 512 MiB written, 18x the L2. The
  claimed value is the copy rate measured on one H200, 4.3 TB/s of bytes read plus written: a
  copy moves exactly the bytes that measurement moved, in the same streaming order, so it should
  run at that rate. Claimed 4300 GB/s, tolerance 0.1 (tail and launch effects, run-to-run
  spread).
* GEMM (``kernels/matmul/kernel.py``, inputs ``kernels/matmul/task.py``): 8192^3 bf16, 1.1 TFLOP
  over 403 MB, arithmetic intensity 2730 FLOP/B against a ridge of about 184 FLOP/B, so the
  matrix units are the ceiling. 8192^3 is 64 x 32 = 2048 tiles of 128x256, 15.5 waves on 132
  SMs, 97% wave efficiency. Measured cuBLAS rate on one H200: about 790 TFLOP/s on random data.
  Our grouped GEMM's main loop runs at about 0.85-0.88 of cuBLAS's (derived in
  ``kernels/matmul/kernel.py`` from Triton's own H100 measurement, PR 5461): claimed
  0.85 x 790 = 670 TFLOP/s, tolerance 0.05.
* Fusion on CPU (``kernels/cpu_softmax/``): softmax is bandwidth-bound; the fused kernel moves a
  quarter of the naive version's bytes, and the claim checks what that buys on a CPU.

The copy and GEMM values are H200 measurements, so those claims name the H200 only. On CPU the
interpreter runs the same kernels at small sizes (and at the GPU's tiles in
tests/kernels/test_gpu_tiles.py); only the GPU measures the rates.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles

COPY_CONFIG = dict(BLOCK=8192, num_warps=8)


@triton.jit
def _copy_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=mask), mask=mask)


def triton_copy(x: torch.Tensor) -> torch.Tensor:
    """The copy kernel: one flat pass, BLOCK elements per program."""
    if not x.is_contiguous():
        raise ValueError("expects a contiguous tensor")
    y = torch.empty_like(x)
    n = x.numel()
    cfg = COPY_CONFIG if gpu_tiles(x) else dict(BLOCK=64, num_warps=1)
    _copy_kernel[(triton.cdiv(n, cfg["BLOCK"]),)](x, y, n, **cfg)
    return y
