"""GEMM with grouped tile ordering, against torch.matmul (cuBLAS). Entry: *Triton tutorials*.

Mechanism (Triton tutorial "Matrix Multiplication", section "L2 Cache Optimizations"). Each
program computes one BLOCK_M x BLOCK_N tile of C. Launched in row-major order, the programs
resident at one time cover a thin strip of C and need a fresh column panel of B for every tile.
Grouped ordering walks GROUP_M row panels down one column before moving right, so the resident
tiles form a near-square block of C and share both A and B panels in L2. The tutorial counts 90
block loads become 54 in a 9x9 example and reports more than 10% on A100 (220 -> 245 TFLOP/s).

The tile body (``tile_coords``, ``tile_mac``, ``store_tile``) and the tile configs are in
``tiles.py``, shared with the persistent, Stream-K, batch-invariant and FP8 GEMMs; the operands,
the reference and the cuBLAS baseline are in ``task.py``.

Derivation of the claimed values (implementer report; facts in docs/sources.md):

* 4096^3 bf16. Arithmetic intensity 2*4096^3 / (3 * 4096^2 * 2 B) = 1365 FLOP/B, far right of
  the ridge of the measured H200 ceilings (790 TFLOP/s / 4.3 TB/s = 184 FLOP/B), so both sides
  are tensor-core bound and the ratio is the ratio of main-loop rates. 128x256 tiles give
  32*16 = 512 tiles = 3.88 waves on 132 SMs (97% wave efficiency), the quantization cuBLAS faces
  too. The anchor is Triton's own H100 measurement of this very kernel shape (the tutorial's
  plain, one-program-per-tile matmul with fixed 128x256 tiles, pointer loads, no TMA): 1209
  TFLOP/s against cuBLAS's 1278 in fp8 at 8192x8192x4096, 0.95 (triton-lang/triton PR 5461). The
  same author saw 13% more from TMA loads in fp16 than without, while cuBLAS uses TMA: if the
  TMA variant is at cuBLAS's rate, our pointer-load loop is at 1 / 1.13 = 0.88 of it in 16-bit.
  **Claimed 0.85** (tolerance 0.05), under both estimates.
* Skinny, M=32, N=28672, K=8192 (a decode batch through a 70B-class MLP up-projection). B is
  470 MB and must be read once by either side: 472 MB / 4.3 TB/s = 110 us, while the 15 GFLOP
  take 19 us at 790 TFLOP/s, so both are bandwidth bound at the same byte count and the ideal
  ratio is 1.0. Grouping does nothing here (one row of tiles). Our 32x64 tiles give 448 tiles,
  up to three resident per SM (72 KB of shared memory each, as compiled for sm_90), each with
  two or three 24 KB k-steps in flight: over 10 MB across the GPU, above the 4.3 TB/s x 1 us =
  4.3 MB that Little's law asks for at a microsecond of memory latency. What cuBLAS can do
  better here is reach a higher fraction of the copy rate (split-K, GEMV kernels); the unknown is
  our achieved fraction of 4.3 TB/s, which only the GPU measures. **Claimed 0.85**: our loop
  streams at 85% or more of cuBLAS's bandwidth.

Check shapes. The claims' check shapes include one that spans several GPU tiles with a ragged
tail in every tiled dimension (200x300x200: 2x2 tiles of 128x256 and 4 k-steps of 64); the
skinny config's BLOCK_M covers M by design (M <= 64 is one row of tiles), so its multi-tile shape
spans N and K (20x200x300).

Only the GPU run measures these. On CPU the same @triton.jit code runs in the Triton interpreter
at small tile sizes, and tests/kernels/test_sm90_compile.py compiles the real configs for sm_90
(pipelined main loops, wgmma for the large tiles, shared memory, spills).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.matmul.tiles import check_operands, gemm_config, store_tile, tile_coords, tile_mac


@triton.jit
def grouped_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                   stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                   GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    """One program per tile of C, tiles in grouped order."""
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    pid_m, pid_n = tile_coords(tl.program_id(0), num_pid_m, num_pid_n, GROUP_M)
    acc = tile_mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   pid_m, pid_n, 0, tl.cdiv(K, BLOCK_K), BLOCK_M, BLOCK_N, BLOCK_K, IEEE)
    store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)


def grouped_matmul(a: torch.Tensor, b: torch.Tensor, cfg: dict | None = None) -> torch.Tensor:
    """The kernel: C = A @ B with grouped tile order, fp32 accumulation, C in A's dtype.
    `cfg` pins the tile config (the batch-invariant kernel uses one for every M)."""
    M, N, K = check_operands(a, b)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    cfg = dict(cfg) if cfg is not None else gemm_config(a, M, N)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    grouped_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                          c.stride(0), c.stride(1), IEEE=a.dtype == torch.float32, **cfg)
    return c
