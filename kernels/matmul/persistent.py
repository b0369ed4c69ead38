"""Persistent GEMM against the same GEMM launched one program per tile. Entry: *Triton tutorials*.

Mechanism (Triton tutorial "Persistent Matmul"). Launch one program per SM and let each loop over
tiles ``pid, pid + P, pid + 2P, ...`` in grouped order. The tile body is the one in
``tiles.py`` with the same tile configuration, so the two sides differ only in how tiles
reach SMs. The tile loop is flattened (``tl.range(..., flatten=True)``) into the k loop, so the
software pipeline issues the next tile's first loads while the current tile finishes, instead of
draining and refilling at every tile boundary. The tutorial gives no headline number.

Derivation of the claimed speedup (implementer report). M = N = 8192, K = 1024, bf16, 128x256x64
tiles, 3 stages (147 KB of shared memory, 180 KB in the persistent loop: one program per SM
either way).

* Both sides run 64*32 = 2048 tiles; the busiest SM runs ceil(2048/132) = 16 of them either way,
  so the schedule is the same and any gain comes from the tile boundary.
* One tile is 2*128*256*1024 = 67 MFLOP; at 790 TFLOP/s / 132 SMs = 6.0 TFLOP/s per SM that is
  t_tile = 11.2 us. Its epilogue (cast and store 64 KB) costs about t_epi = 0.5 us on both sides.
* Launched per tile, every tile also waits for its first loads before its first MMA: about one
  memory round trip, t_fill = 1 us. The persistent loop overlaps that with the previous tile.
* Expected speedup (t_tile + t_fill + t_epi) / (t_tile + t_epi) = 12.7 / 11.7 = 1.08. K = 1024
  keeps the tile short, so the boundary is about 8% of the work. The estimate of t_fill is the
  weak step, so we check it against a measurement: Triton's persistent tutorial kernel ran 6.3%
  faster than the plain one-program-per-tile kernel on an H100 in fp8 at 8192x8192x4096 (1285
  against 1209 TFLOP/s, triton-lang/triton PR 5461; docs/sources.md). There a 128x256 tile does
  2*128*256*4096 FLOP at twice the bf16 rate, the same tile time as ours at K = 2048; at our
  K = 1024 the tile is half as long, so the same fixed boundary cost is about twice the
  fraction: 1 + 2 x 0.063 = 1.13. **Claimed 1.08**, tolerance 0.07: below both estimates; the
  threshold is 1.08 x 0.93 = 1.004, so the claim verifies only when the persistent kernel is
  faster than the launch-per-tile one (0.08 gave 0.994, which `check` now refuses: a kernel no
  faster than its baseline would have verified).

Only the GPU measures this. The flattened loop is compiled for sm_90 here
(tests/kernels/test_sm90_compile.py); on CPU the interpreter runs the same loop (flattening is a
compiler hint) with three programs, each taking several tiles, at small tile sizes. On the GPU the
check shapes must also make a program take more than one tile, which needs more than 132 tiles of
128x256: the last check shape, 1500x2900x100, has 12 x 12 = 144, so 12 programs loop over a second
tile, with a ragged last row and column of tiles and a ragged second k-step. The interpreter runs
that shape at the GPU's own tiles (``tiles.gemm_config``), in about 3.5 s per side; it replaced
300x600x100 (3x3 GPU tiles, each program one tile), which took 10 s at the interpreter's tiles.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import interpreted
from kernels.matmul.tiles import check_operands, gemm_config, sm_count, store_tile, tile_coords, tile_mac

CPU_PROGRAMS = 3  # interpreter: few programs, so each one loops over several tiles


@triton.jit
def _persistent_kernel(a_ptr, b_ptr, c_ptr, M, N, K, num_programs,
                       stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                       BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                       GROUP_M: tl.constexpr, IEEE: tl.constexpr):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    k_steps = tl.cdiv(K, BLOCK_K)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, num_programs, flatten=True):
        pid_m, pid_n = tile_coords(tile, num_pid_m, num_pid_n, GROUP_M)
        acc = tile_mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                       pid_m, pid_n, 0, k_steps, BLOCK_M, BLOCK_N, BLOCK_K, IEEE)
        store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n, BLOCK_M, BLOCK_N)


def persistent_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The kernel: one program per SM, each looping over tiles in grouped order."""
    M, N, K = check_operands(a, b)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    cfg = gemm_config(a, M, N)
    tiles = triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"])
    programs = CPU_PROGRAMS if interpreted(a) else sm_count(a.device.index or 0)
    programs = max(1, min(programs, tiles))
    _persistent_kernel[(programs,)](a, b, c, M, N, K, programs, a.stride(0), a.stride(1),
                                    b.stride(0), b.stride(1), c.stride(0), c.stride(1),
                                    IEEE=a.dtype == torch.float32, **cfg)
    return c
