"""SGEMM without tensor cores: a block-tiled fp32 GEMM in Triton against cuBLAS's SGEMM.

List entry: *How to Optimize a CUDA Matmul Kernel for cuBLAS-like Performance* (S. Boehm's
worklog). The worklog takes an fp32 GEMM from a naive kernel (1.3% of cuBLAS on an RTX A6000)
through global-memory coalescing, shared-memory blocking, 1-D and 2-D register blocking,
vectorized loads and warp tiling to 93.7% of cuBLAS at 4096^2 (docs/sources.md).

Mechanism, step by step as the worklog teaches it, and where each step lives here:
- shared-memory blocking (worklog kernel 3): each program owns a BLOCK_M x BLOCK_N tile of C and
  walks K in BLOCK_K slices staged through shared memory, so each element of A and B is fetched
  from DRAM once per tile instead of once per output. Triton stages the ``tl.load`` of a k-slice
  through shared memory and pipelines three slices with cp.async (``num_stages=3``).
- 2-D register blocking (kernels 5-6): with 128 x 128 tiles and 8 warps, each of the 256 threads
  owns an 8 x 8 block of C in registers and, per k, reads 8 values of A and 8 of B from shared
  memory for 64 FMAs. Triton lays the fp32 ``tl.dot`` out this way by itself: compiled for sm_90
  it issues 1024 FMAs per 16-deep k-slice per thread and no tensor-core instruction
  (``input_precision="ieee"`` keeps TF32 off). tests/kernels/test_sm90_compile.py checks that.
- the tile body is the same ``tile_mac`` as every GEMM here (kernels/matmul/tiles.py); only the
  fp32 config differs.

The claimed value (implementer report). 4096^3 fp32: 137 GFLOP over 201 MB, 684 FLOP per byte,
compute-bound for any fp32 kernel, so the ratio is the ratio of FMA issue efficiency. Published
fractions of cuBLAS for this kind of kernel: 93.7% for the worklog's warp-tiled CUDA kernel on an
A6000, and 0.95 for Triton's tutorial matmul run in fp32 on an A100 (17.95 against 18.88
TFLOP/s at 5120 x 4096 x 4096). Why less on Hopper: a Hopper SM issues
twice an A100 SM's FP32 FMAs per clock (128 against 64) from a shared memory of the same 32
four-byte banks, so an 8 x 8 thread tile, which reads 16 words per 64 FMAs, needs the shared
memory's full rate to keep the FMA units busy, and every bank conflict or issue slot spent on
addresses costs FMA throughput one for one (cuBLAS can use larger register tiles). Those two
architecture figures are not confirmed here against a source, which is one more reason to stay
well below the published 0.94-0.95: **claimed 0.7** of cuBLAS, tolerance 0.1. Only the GPU
measures it.

The baseline is ``torch.matmul`` on fp32 tensors (kernels/matmul/task.py), which runs cuBLAS's
SGEMM: PyTorch's default float32 matmul precision is "highest", so no TF32.
"""

from __future__ import annotations

import torch
import triton

from kernels.launch import gpu_tiles
from kernels.matmul.kernel import grouped_kernel
from kernels.matmul.tiles import check_operands

# 128x128x16, 8 warps: 8x8 fp32 accumulators per thread, 3 stages of 16 KB in shared memory.
SGEMM_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=16, GROUP_M=8, num_warps=8, num_stages=3)
SGEMM_CONFIG_INTERPRETER = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=16, GROUP_M=2, num_warps=1, num_stages=1)


def sgemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B in fp32 on the FMA units (no TF32), block-tiled, grouped tile order."""
    M, N, K = check_operands(a, b)
    if a.dtype != torch.float32 or b.dtype != torch.float32:
        raise ValueError("sgemm multiplies float32 matrices")
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    cfg = dict(SGEMM_CONFIG if gpu_tiles(a) else SGEMM_CONFIG_INTERPRETER)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    grouped_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                         c.stride(0), c.stride(1), IEEE=True, **cfg)
    return c
