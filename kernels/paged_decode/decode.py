"""The Triton decode kernel both sides of the paged-decode claim run, with and without a block
table (list entry: PagedAttention and vLLM).

One program per (sequence, KV head), grouped-query tiles through ``tl.dot``, online softmax over
BLOCK_N-token tiles. With ``PAGED`` each tile first loads BLOCK_N / PAGE_SIZE physical block
numbers from the block table and gathers the 16-token pages; without it the tile is one
contiguous run of the cache. ``kernel.py`` (paged) and ``task.contiguous_decode`` (contiguous)
both call ``launch``, so the claim measures the indirection alone.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles

PAGE_SIZE = 16
_LOG2E = 1.4426950408889634
# Fixed launch configs, no autotune. 8 warps on Hopper: at 4 the paged gather spills registers on
# sm_90 (the contiguous path does not); both sides use the same config.
GPU_CONFIG = dict(BLOCK_N=64, num_warps=8, num_stages=3)
CPU_CONFIG = dict(BLOCK_N=2 * PAGE_SIZE, num_warps=4, num_stages=1)


@triton.jit
def _decode_kernel(Q, K, V, O, BlockTable, SeqLens, stride_qb, stride_qh, stride_k0, stride_kh,
                   stride_kn, stride_v0, stride_vh, stride_vn, stride_ob, stride_oh, stride_bt,
                   seqlen_arg, head_dim, group, qk_scale,
                   PAGED: tl.constexpr, PAGE: tl.constexpr, BLOCK_G: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1).to(tl.int64)
    if PAGED:
        seqlen = tl.load(SeqLens + b)
    else:
        seqlen = seqlen_arg
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    g_mask = offs_g < group
    d_mask = offs_d < head_dim
    qh = kvh * group + offs_g
    q = tl.load(Q + b * stride_qb + qh[:, None] * stride_qh + offs_d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    for start_n in range(0, seqlen, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_mask = offs_n < seqlen
        if PAGED:
            phys = tl.load(BlockTable + b * stride_bt + offs_n // PAGE, mask=n_mask, other=0)
            row = phys.to(tl.int64)[:, None]
            tok = (offs_n % PAGE)[:, None]
        else:
            row = b
            tok = offs_n[:, None]
        kv_mask = n_mask[:, None] & d_mask[None, :]
        k = tl.load(K + row * stride_k0 + kvh * stride_kh + tok * stride_kn + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(n_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(V + row * stride_v0 + kvh * stride_vh + tok * stride_vn + offs_d[None, :],
                    mask=kv_mask, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(O + b * stride_ob + qh[:, None] * stride_oh + offs_d[None, :],
             (acc / l_i[:, None]).to(O.dtype.element_ty), mask=g_mask[:, None] & d_mask[None, :])


def launch(q, k, v, block_table, seq_lens, seqlen: int, paged: bool) -> torch.Tensor:
    batch, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    if group * kv_heads != q_heads:
        raise ValueError("q_heads must be a multiple of kv_heads")
    out = torch.empty_like(q)
    cfg = GPU_CONFIG if gpu_tiles(q) else CPU_CONFIG
    _decode_kernel[(batch, kv_heads)](
        q, k, v, out, block_table, seq_lens, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        k.stride(2), v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1),
        block_table.stride(0) if paged else 0, seqlen, head_dim, group, _LOG2E / math.sqrt(head_dim),
        PAGED=paged, PAGE=PAGE_SIZE, BLOCK_G=max(16, triton.next_power_of_2(group)),
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)), **cfg)
    return out
