"""The Triton decode-attention kernel both sides of the GQA claim run (list entry: Grouped-Query
Attention).

One program owns one (sequence, KV head) and streams that head's K and V in BLOCK_N-row blocks
with an online softmax. With G = q_heads / kv_heads > 1 the group's query heads form a G x D tile
scored against each K block through ``tl.dot`` (G padded to 16); with G = 1 (multi-head decode
over an expanded cache) one query row is scored by a vector reduction. The GQA kernel
(``kernel.py``) and the multi-head baseline (``task.mha_decode``) both call ``decode``: the claim
is about the cache layout, not the code, so the code is shared on purpose.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles

_LOG2E = 1.4426950408889634
# Fixed launch configs, no autotune: Hopper (no register spills on sm_90), and the interpreter.
GPU_CONFIG = dict(BLOCK_N=64, num_warps=4, num_stages=3)
CPU_CONFIG = dict(BLOCK_N=16, num_warps=4, num_stages=1)


@triton.jit
def _decode_kernel(Q, K, V, O, stride_qb, stride_qh, stride_kb, stride_kh, stride_kn,
                   stride_vb, stride_vh, stride_vn, stride_ob, stride_oh,
                   seqlen, head_dim, group, qk_scale,
                   BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_D)
    d_mask = offs_d < head_dim
    k_base = K + b * stride_kb + kvh * stride_kh
    v_base = V + b * stride_vb + kvh * stride_vh
    if BLOCK_G == 1:
        # Multi-head decode: one query row, scored by a vector reduction.
        q = tl.load(Q + b * stride_qb + kvh * stride_qh + offs_d, mask=d_mask, other=0.0)
        q = q.to(tl.float32)
        m_i = tl.full([1], float("-inf"), tl.float32)
        l_i = tl.zeros([1], tl.float32)
        acc = tl.zeros([BLOCK_D], tl.float32)
        for start_n in range(0, seqlen, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            n_mask = offs_n < seqlen
            kv_mask = n_mask[:, None] & d_mask[None, :]
            k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :], mask=kv_mask, other=0.0)
            s = tl.sum(k.to(tl.float32) * q[None, :], 1) * qk_scale
            s = tl.where(n_mask, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 0))
            p = tl.exp2(s - m_new)
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 0)
            v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :], mask=kv_mask, other=0.0)
            acc = acc * alpha + tl.sum(p[:, None] * v.to(tl.float32), 0)
            m_i = m_new
        tl.store(O + b * stride_ob + kvh * stride_oh + offs_d, (acc / l_i).to(O.dtype.element_ty),
                 mask=d_mask)
    else:
        # Grouped decode: the group's query heads form a BLOCK_G x D tile against each KV block.
        offs_g = tl.arange(0, BLOCK_G)
        g_mask = offs_g < group
        qh = kvh * group + offs_g
        q = tl.load(Q + b * stride_qb + qh[:, None] * stride_qh + offs_d[None, :],
                    mask=g_mask[:, None] & d_mask[None, :], other=0.0)
        m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
        l_i = tl.zeros([BLOCK_G], tl.float32)
        acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
        for start_n in range(0, seqlen, BLOCK_N):
            offs_n = start_n + tl.arange(0, BLOCK_N)
            n_mask = offs_n < seqlen
            kv_mask = n_mask[:, None] & d_mask[None, :]
            k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :], mask=kv_mask, other=0.0)
            s = tl.dot(q, tl.trans(k)) * qk_scale
            s = tl.where(n_mask[None, :], s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
            alpha = tl.exp2(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :], mask=kv_mask, other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m_i = m_new
        tl.store(O + b * stride_ob + qh[:, None] * stride_oh + offs_d[None, :],
                 (acc / l_i[:, None]).to(O.dtype.element_ty), mask=g_mask[:, None] & d_mask[None, :])


def decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Launch one program per (sequence, KV head); the group size is q_heads / kv_heads."""
    batch, q_heads, head_dim = q.shape
    kv_heads, seqlen = k.shape[1], k.shape[2]
    group = q_heads // kv_heads
    if group * kv_heads != q_heads or tuple(v.shape) != tuple(k.shape):
        raise ValueError("q_heads must be a multiple of kv_heads, and K and V must match")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    out = torch.empty_like(q)
    block_g = 1 if group == 1 else max(16, triton.next_power_of_2(group))
    block_d = max(16, triton.next_power_of_2(head_dim))
    cfg = GPU_CONFIG if gpu_tiles(q) else CPU_CONFIG
    _decode_kernel[(batch, kv_heads)](
        q, k, v, out, q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), out.stride(0), out.stride(1),
        seqlen, head_dim, group, _LOG2E / math.sqrt(head_dim),
        BLOCK_G=block_g, BLOCK_D=block_d, **cfg)
    return out
