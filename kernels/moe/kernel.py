"""Fused MoE expert GEMM in Triton: (token, slot) pairs sorted by expert, one grouped launch.

List entry: *DeepSeek-V3*. DeepSeek's MoE layers (DeepSeekMoE, used by V2 and V3) split the
feed-forward into many fine-grained routed experts, of which each token activates a few; in
DeepSeek-V2-Lite, the shape used here, 6 of 64 (docs/sources.md). So each expert sees only a few
hundred tokens of a prefill chunk. Run as a loop over experts, that is 64 small GEMMs, each with a
gather, a scatter and a host synchronization to learn how many tokens the expert got
(``task.expert_loop``). The fused form, the one serving engines use (vLLM's fused_moe, the
grouped GEMMs DeepEP feeds): sort the (token, slot) pairs by expert, pad each expert's run to a
multiple of the tile height, and launch one grouped GEMM in which every program takes a
BLOCK_M-row tile of one expert's pairs, gathers those tokens' rows of x as it loads A (no
gathered copy in memory), multiplies by that expert's weight and writes each row straight to
its (token, slot) place. The sort and the tile table are a handful of small torch ops with no
host synchronization: the grid is sized for the worst case and surplus programs exit.

Workload: 4096 tokens (a prefill chunk), 64 experts, top-6, K = 2048 (model width), N = 1408
(expert width), bf16: 24576 pairs, 384 per expert on average; 1.4e11 FLOP; 369 MB of weights.

Derivation of the claimed speedup (implementer report; docs/sources.md).
* Fused: compute-bound (weights 369 MB = 86 us at 4.3 TB/s; FLOP 180 us at 790 TFLOP/s). Tiles of
  128 rows: with 384 +- 20 pairs per expert most experts fill 3-4 tiles, about 15% padding; at
  0.6 of cuBLAS's rate (our grouped tile body; kernels/matmul/kernel.py derives 0.85 for large
  GEMMs, less here for the gather and the short K) about 0.35 ms, plus about 30 us of sorting.
* Loop: the same FLOP in 64 GEMMs of 384 x 1408 x 2048, each only 33 tiles of 128 x 128 for 132
  SMs, so at most about a quarter of the GPU per GEMM unless cuBLAS picks smaller tiles: at least
  the fused kernel's 0.18 ms of matrix work, and in practice more. On top, per expert: a compare,
  a ``nonzero`` whose size the host must read before it can launch the gather (a device-to-host
  synchronization), the gather, the GEMM and the scatter, about five launches and one round trip.
  Call that fixed cost o per expert; it is a host and driver latency only the GPU machine can
  measure.
* Speedup = (0.18 ms / eta + 64 o) / 0.38 ms with eta <= 1 the loop's GEMM efficiency.
  **Claimed 2.0**, tolerance 0.1: verified while 64 o + 0.18 ms / eta >= 0.68 ms, e.g. at eta = 0.5
  with o >= 5 us, or at eta = 1 with o >= 8 us; one synchronizing ``nonzero`` plus five launches
  costs more than that on any host we know of, but it is the GPU machine's host that decides.

On CPU the interpreter runs the sort, the padded tile table, the gathered loads, the surplus
programs and the scattered stores at small tiles, and at the GPU's 128x128x64 tiles in
tests/kernels/test_gpu_tiles.py. Only the GPU measures the speed.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles

GPU_CONFIG = dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_warps=8, num_stages=3)
CPU_CONFIG = dict(BLOCK_M=32, BLOCK_N=64, BLOCK_K=32, num_warps=1, num_stages=1)


@triton.jit
def _moe_kernel(x_ptr, w_ptr, y_ptr, pairs_ptr, tile_expert_ptr, tile_start_ptr, tile_end_ptr,
                N, K, topk, stride_xm, stride_we, stride_wn, stride_ym,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, IEEE: tl.constexpr):
    """One BLOCK_M-row tile of one expert's sorted pairs times one BLOCK_N-column block of W_e^T."""
    tile = tl.program_id(0)
    pid_n = tl.program_id(1)
    expert = tl.load(tile_expert_ptr + tile)
    if expert >= 0:
        start = tl.load(tile_start_ptr + tile)
        end = tl.load(tile_end_ptr + tile)
        offs_r = start + tl.arange(0, BLOCK_M)
        r_mask = offs_r < end
        pair = tl.load(pairs_ptr + offs_r, mask=r_mask, other=0)
        token = (pair // topk).to(tl.int64)
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        n_mask = offs_n < N
        offs_k = tl.arange(0, BLOCK_K)
        a_ptrs = x_ptr + token[:, None] * stride_xm + offs_k[None, :]
        b_ptrs = w_ptr + expert.to(tl.int64) * stride_we + offs_n[None, :] * stride_wn + offs_k[:, None]
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k_ok = offs_k < K - k0
            a = tl.load(a_ptrs + k0, mask=r_mask[:, None] & k_ok[None, :], other=0.0)
            b = tl.load(b_ptrs + k0, mask=k_ok[:, None] & n_mask[None, :], other=0.0)
            if IEEE:
                acc = tl.dot(a, b, acc, input_precision="ieee")
            else:
                acc = tl.dot(a, b, acc)
        y_ptrs = y_ptr + pair.to(tl.int64)[:, None] * stride_ym + offs_n[None, :]
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=r_mask[:, None] & n_mask[None, :])


def _tile_table(ids: torch.Tensor, experts: int, block_m: int):
    """Pairs sorted by expert and, per row tile, its expert and [start, end) in that order;
    sized for the worst case (no host synchronization), unused tiles marked expert -1."""
    flat = ids.reshape(-1).to(torch.int64)
    pairs = torch.argsort(flat, stable=True).to(torch.int32)
    counts = torch.bincount(flat, minlength=experts)
    ends = torch.cumsum(counts, 0)
    starts = ends - counts
    tiles = torch.div(counts + block_m - 1, block_m, rounding_mode="floor")
    first_tile = torch.cumsum(tiles, 0) - tiles
    max_tiles = triton.cdiv(flat.numel(), block_m) + experts
    t = torch.arange(max_tiles, device=ids.device)
    expert = torch.searchsorted(torch.cumsum(tiles, 0), t, right=True)
    valid = expert < experts
    e = expert.clamp(max=experts - 1)
    tile_start = starts[e] + (t - first_tile[e]) * block_m
    tile_end = torch.minimum(tile_start + block_m, ends[e])
    tile_expert = torch.where(valid, e, torch.full_like(e, -1)).to(torch.int32)
    return pairs, tile_expert, tile_start.to(torch.int32), tile_end.to(torch.int32), max_tiles


def fused_moe(x: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Kernel: y[t, j] = x[t] W[ids[t, j]]^T for every pair, in one grouped launch."""
    tokens, K = x.shape
    experts, N, _ = w.shape
    topk = ids.shape[1]
    x, w = x.contiguous(), w.contiguous()
    cfg = dict(GPU_CONFIG if gpu_tiles(x) else CPU_CONFIG)
    pairs, tile_expert, tile_start, tile_end, max_tiles = _tile_table(ids, experts, cfg["BLOCK_M"])
    y = torch.empty((tokens * topk, N), device=x.device, dtype=x.dtype)
    grid = (max_tiles, triton.cdiv(N, cfg["BLOCK_N"]))
    _moe_kernel[grid](x, w, y, pairs, tile_expert, tile_start, tile_end, N, K, topk,
                      x.stride(0), w.stride(0), w.stride(1), y.stride(0),
                      IEEE=x.dtype == torch.float32, **cfg)
    return y.view(tokens, topk, N)
