"""The GEMM tile body every Triton GEMM here shares, and the fixed tile configurations.

One program computes one BLOCK_M x BLOCK_N tile of C = A @ B: ``tile_coords`` maps a tile index
to its place in C (grouped order), ``tile_mac`` accumulates A-row-panel times B-column-panel over
a range of k-steps in fp32, and ``store_tile`` casts and stores the part inside M x N. The
grouped, persistent, Stream-K, batch-invariant and FP8 GEMMs, and the data-parallel baseline of
the Stream-K claim, are built from these three pieces, so each claim differs only in what it is
about. This module is a helper of both sides: it holds no claim's kernel entry point.
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles


@triton.jit
def tile_coords(tile_id, num_pid_m, num_pid_n, GROUP_M: tl.constexpr):
    """Grouped order: GROUP_M row panels go down one column of tiles before moving right."""
    per_group = GROUP_M * num_pid_n
    first_m = (tile_id // per_group) * GROUP_M
    rows = tl.minimum(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + (tile_id % per_group) % rows
    pid_n = (tile_id % per_group) // rows
    return pid_m, pid_n


@triton.jit
def tile_mac(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
             pid_m, pid_n, k_first, k_last,
             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
             IEEE: tl.constexpr):
    """fp32 sum over BLOCK_K steps [k_first, k_last) of A[tile rows, k] @ B[k, tile cols].

    Rows and columns past M and N wrap (modulo) so every load is in bounds; those results are
    dropped by the masked store. The K tail is masked to zero. Each output element depends only
    on its own row of A and column of B, in a fixed order of k steps.
    """
    offs_m = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    offs_n = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(k_first, k_last):
        k0 = kk * BLOCK_K
        k_ok = offs_k < K - k0
        a = tl.load(a_ptrs + k0 * stride_ak, mask=k_ok[None, :], other=0.0)
        b = tl.load(b_ptrs + k0 * stride_bk, mask=k_ok[:, None], other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
    return acc


@triton.jit
def store_tile(c_ptr, acc, M, N, stride_cm, stride_cn, pid_m, pid_n,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Cast the fp32 tile to C's dtype and store the part inside M x N."""
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


# Tile configs. No autotuning: a run is reproducible and the derivations name the tiles.
CONFIG_LARGE = dict(BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, num_warps=8, num_stages=3)
CONFIG_SKINNY = dict(BLOCK_N=64, BLOCK_K=128, GROUP_M=1, num_warps=4, num_stages=4)  # BLOCK_M from M
CONFIG_INTERPRETER = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=2, num_warps=1, num_stages=1)
INTERPRETER_MAX_TILES = 1024  # above this many small tiles the interpreter takes the GPU's tiles


def gemm_config(a: torch.Tensor, M: int, N: int) -> dict:
    """One fixed config per regime.

    Large: 128x256x64, 8 warps, 3 stages, GROUP_M 8 (the first config of the tutorial's list).
    Skinny (M <= 64): BLOCK_M from M, 64x128 for N and K, 4 stages; the grid needs many tiles.
    Interpreter: 32x32x32 tiles, unless that makes more than INTERPRETER_MAX_TILES tiles. A check
    shape that large exists to give the GPU's tiling more tiles than SMs (a persistent program
    looping over several ragged tiles); the interpreter then launches the GPU's own tiles, which
    is also what keeps it fast (its cost is per tile op: 1500x2900x40 takes 2 s at 128x256 tiles,
    95 s at 32x32).
    """
    if not gpu_tiles(a) and triton.cdiv(M, 32) * triton.cdiv(N, 32) <= INTERPRETER_MAX_TILES:
        return dict(CONFIG_INTERPRETER)
    if M <= 64:
        return dict(CONFIG_SKINNY, BLOCK_M=16 if M <= 16 else (32 if M <= 32 else 64))
    return dict(CONFIG_LARGE)


def check_operands(a: torch.Tensor, b: torch.Tensor) -> tuple[int, int, int]:
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"expects A (M, K) and B (K, N); got {tuple(a.shape)} and {tuple(b.shape)}")
    return a.shape[0], b.shape[1], a.shape[1]


@lru_cache(maxsize=8)
def sm_count(device_index: int) -> int:
    """SMs of a CUDA device, read once per process (never at import)."""
    return torch.cuda.get_device_properties(device_index).multi_processor_count
