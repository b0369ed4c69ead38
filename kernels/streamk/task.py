"""Stream-K task: the data-parallel GEMM baseline and the tile config both sides use.

The operands and the float64 reference are the GEMM task's (``kernels/matmul/task.py``). The
baseline launches one program per 128x128 output tile in row-major order, with the same tile
body (``kernels/matmul/tiles.py``) and the same config as the Stream-K kernel in ``kernel.py``,
so the two differ only in how the work is divided among programs. On a shape whose tile count is
just above a multiple of the SM count, this baseline runs a nearly empty last wave.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles
from kernels.matmul.tiles import check_operands, store_tile, tile_mac

# The same tile for both sides; 128 KB of shared memory pins one program per SM.
CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=4)
CONFIG_INTERPRETER = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, num_warps=1, num_stages=1)


def tile_config(a: torch.Tensor) -> dict:
    return dict(CONFIG if gpu_tiles(a) else CONFIG_INTERPRETER)


@triton.jit
def _data_parallel_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                          stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                          IEEE: tl.constexpr):
    tile = tl.program_id(0)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    acc = tile_mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   tile // num_pid_n, tile % num_pid_n, 0, tl.cdiv(K, BLOCK_K),
                   BLOCK_M, BLOCK_N, BLOCK_K, IEEE)
    store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, tile // num_pid_n, tile % num_pid_n,
               BLOCK_M, BLOCK_N)


def data_parallel_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The baseline: one program per output tile, row-major tile order, same tile config."""
    M, N, K = check_operands(a, b)
    cfg = tile_config(a)
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(M, cfg["BLOCK_M"]) * triton.cdiv(N, cfg["BLOCK_N"]),)
    _data_parallel_kernel[grid](a, b, c, M, N, K, a.stride(0), a.stride(1), b.stride(0),
                                b.stride(1), c.stride(0), c.stride(1),
                                IEEE=a.dtype == torch.float32, **cfg)
    return c
