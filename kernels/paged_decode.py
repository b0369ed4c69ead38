"""Paged-KV decode attention in Triton (list entry: PagedAttention and vLLM).

Mechanism. vLLM stores the KV cache in fixed-size physical blocks (pages of PAGE_SIZE = 16
tokens here, a common vLLM block size) allocated on demand, so a sequence's cache is scattered and a block
table maps (sequence, logical page) to a physical block. This kernel reads K and V through that
table: for each BLOCK_N-token tile it loads BLOCK_N / PAGE_SIZE block numbers and gathers the
pages. The untimed ``prepare`` builds the paged layout from the same K and V: pages placed at
shuffled physical block numbers (a fixed permutation, as a free list would hand them out),
the block table, and per-sequence lengths. The baseline is the same kernel reading the
contiguous (batch, kv_heads, seqlen, head_dim) cache directly; both use grouped-query tiles.

Why the cost should be small (implementer-report). Paging buys memory utilisation (the paper's
20.4-38.2% KV use in earlier systems, §3), not speed; the claim is that indirection costs little.
At B=64, 32 query heads, 8 KV heads, S=4096, D=128, bf16, both sides must stream the
1.07 GB of K and V. The paged side also reads the block table, 64 * 256 * 4 B = 64 KB (0.006%),
and each page of one head is a contiguous 16 * 128 * 2 B = 4 KB run, far above the 32-128 B
sector/line granularity of HBM traffic, so coalescing is unchanged. What remains is address
arithmetic and a dependent load (block number, then page) at the start of each tile, which the
pipelined loads hide. Expected ratio (contiguous time / paged time) about 0.95-1.0; claimed 0.9
(tolerance 0.05): the paged kernel runs at 90% or more of the contiguous kernel's speed.

What only the GPU check covers. The CPU test runs the paged gather, the partial last page and
the grouped tiles under TRITON_INTERPRET=1 in float32 with small blocks, and
tests/kernels/test_triton_sm90.py compiles both layouts for sm_90 at GPU_CONFIG without spills
(at 4 warps the paged gather spilled, hence 8); bf16 accuracy and the overhead itself need an
H100/H200.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

# Same inputs and float64 reference as grouped decode: paging changes the layout, not the function.
from kernels.gqa_decode import make_inputs, reference_fp64  # noqa: F401

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


def _launch(q, k, v, block_table, seq_lens, seqlen: int, paged: bool) -> torch.Tensor:
    batch, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    if group * kv_heads != q_heads:
        raise ValueError("q_heads must be a multiple of kv_heads")
    out = torch.empty_like(q)
    cfg = GPU_CONFIG if q.is_cuda else CPU_CONFIG
    _decode_kernel[(batch, kv_heads)](
        q, k, v, out, block_table, seq_lens, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
        k.stride(2), v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1),
        block_table.stride(0) if paged else 0, seqlen, head_dim, group, _LOG2E / math.sqrt(head_dim),
        PAGED=paged, PAGE=PAGE_SIZE, BLOCK_G=max(16, triton.next_power_of_2(group)),
        BLOCK_D=max(16, triton.next_power_of_2(head_dim)), **cfg)
    return out


def to_paged(q, k, v):
    """Kernel prepare (untimed): pages at shuffled physical blocks, block table, lengths."""
    batch, kv_heads, seqlen, head_dim = k.shape
    pages = triton.cdiv(seqlen, PAGE_SIZE)
    perm = torch.randperm(batch * pages, generator=torch.Generator().manual_seed(0))
    perm = perm.to(k.device)

    def paged(t):
        padded = t.new_zeros(batch, kv_heads, pages * PAGE_SIZE, head_dim)
        padded[:, :, :seqlen] = t
        logical = padded.view(batch, kv_heads, pages, PAGE_SIZE, head_dim).transpose(1, 2)
        cache = t.new_empty(batch * pages, kv_heads, PAGE_SIZE, head_dim)
        cache[perm] = logical.reshape(batch * pages, kv_heads, PAGE_SIZE, head_dim)
        return cache

    block_table = perm.view(batch, pages).to(torch.int32).contiguous()
    seq_lens = torch.full((batch,), seqlen, dtype=torch.int32, device=k.device)
    return q.contiguous(), paged(k), paged(v), block_table, seq_lens


def paged_decode(q, k_cache, v_cache, block_table, seq_lens):
    """Kernel: decode attention reading K and V through the block table."""
    return _launch(q, k_cache, v_cache, block_table, seq_lens, 0, paged=True)


def to_contiguous(q, k, v):
    """Baseline prepare (untimed): contiguous (batch, kv_heads, seqlen, head_dim) caches."""
    return q.contiguous(), k.contiguous(), v.contiguous()


def contiguous_decode(q, k, v):
    """Baseline: the same decode kernel over the contiguous cache."""
    # No block table: q stands in for the two unused pointers, so nothing extra is launched.
    return _launch(q, k, v, q, q, k.shape[2], paged=False)

