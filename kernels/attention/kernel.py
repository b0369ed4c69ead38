"""Fused attention forward, FlashAttention-2 style (list entry: FlashAttention-2).

Mechanism. Each program owns BLOCK_M query rows of one (batch, head) and streams K and V in
BLOCK_N-row blocks. The softmax is online: a running row maximum ``m`` and normalizer ``l``
rescale the output accumulator whenever a block raises the maximum, and the division by ``l``
happens once at the end (the FA2 abstract: fewer non-matmul FLOPs; parallel over query blocks
as well as heads). The N x N score matrix never leaves registers. Causal attention skips every
KV block above the diagonal and masks only the diagonal blocks, so it does half the work.

Why it wins against materialized attention. Eager ``softmax(Q K^T / sqrt(d)) V`` writes the score
matrix S (B*H*N*N bf16) to HBM and reads it back: QK^T writes S, softmax reads and writes it, PV
reads it; the causal variant adds a masked_fill (one more read and write). At B=4, H=32, N=4096,
S is 2^31 elements = 4.3 GB, so eager moves 4 x 4.3 = 17.2 GB (causal 25.8 GB) on top of the
0.27 GB of Q, K, V, O. Derivation of the claimed values (implementer-report):
- Eager, non-causal: 17.2 GB at the ~4.3 TB/s copy rate measured on one H200 = 4.0 ms, plus the
  two batched GEMMs (5.5e11 FLOP, ~0.7 ms at 790 TFLOP/s) = about 4.7 ms.
- Fused, non-causal: the same 4*N^2*D*H*B = 5.5e11 FLOP. FA2 reports up to 335 TFLOP/s on H100
  with its unmodified A100 code (paper §4.1); at the project's 70% target of that, ~230 TFLOP/s,
  it takes 2.4 ms. Expected speedup 4.7 / 2.4 = 2.0. Claimed 1.5, tolerance 0.1: the threshold
  1.35 still holds down to ~160 TFLOP/s, a margin for an untuned D=64 tile.
- Causal: eager does the full work plus the masking pass (~6.7 ms); the fused kernel does half
  the FLOPs, ~1.2-1.4 ms with the diagonal blocks' masked half. Expected ~5x; claimed 3.0.
- Against ``scaled_dot_product_attention`` pinned to its flash backend (FA2's CUDA kernel): the
  same algorithm and FLOPs, both compute-bound (N/2 = 2048 FLOP per byte of Q, K, V, O), so the
  ratio is the ratio of achieved matrix rates. Claimed 0.7 (tolerance 0.15): the issue's target
  for this kernel, stated as a claim to be checked, not a figure measured or derived further.

What only the GPU check covers. The CPU test runs this same kernel (online softmax, masks,
causal split) under TRITON_INTERPRET=1 at 16x16 blocks in float32; tests/kernels/
test_triton_sm90.py compiles the bf16 128x64 variants for sm_90 (wgmma, no spills). Accuracy in
bf16 and every timing need an H100/H200.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

_LOG2E = 1.4426950408889634


@triton.jit
def _attn_block(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn, offs_m, offs_d, d_mask,
                seqlen, lo, hi, qk_scale,
                BLOCK_N: tl.constexpr, DIAGONAL: tl.constexpr, EVEN_N: tl.constexpr):
    """Online-softmax update of (acc, l_i, m_i) over the KV rows [lo, hi)."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_mask = offs_n < seqlen
        k = tl.load(k_base + offs_n[:, None] * stride_kn + offs_d[None, :],
                    mask=n_mask[:, None] & d_mask[None, :], other=0.0)
        qk = tl.dot(q, tl.trans(k)) * qk_scale
        if DIAGONAL:
            keep = (offs_m[:, None] >= offs_n[None, :]) & n_mask[None, :]
            qk = tl.where(keep, qk, float("-inf"))
        elif not EVEN_N:
            qk = tl.where(n_mask[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_base + offs_n[:, None] * stride_vn + offs_d[None, :],
                    mask=n_mask[:, None] & d_mask[None, :], other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(Q, K, V, O, stride_qh, stride_qm, stride_kh, stride_kn, stride_vh, stride_vn,
              stride_oh, stride_om, seqlen, head_dim, qk_scale,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
              CAUSAL: tl.constexpr, EVEN_N: tl.constexpr):
    start_m = tl.program_id(0) * BLOCK_M
    bh = tl.program_id(1).to(tl.int64)
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    m_mask = offs_m < seqlen
    d_mask = offs_d < head_dim
    q = tl.load(Q + bh * stride_qh + offs_m[:, None] * stride_qm + offs_d[None, :],
                mask=m_mask[:, None] & d_mask[None, :], other=0.0)
    k_base = K + bh * stride_kh
    v_base = V + bh * stride_vh
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    if CAUSAL:
        # Blocks wholly below the diagonal need no mask (BLOCK_M is a multiple of BLOCK_N).
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn,
                                    offs_m, offs_d, d_mask, seqlen, 0, start_m, qk_scale,
                                    BLOCK_N, False, True)
        hi = tl.minimum(start_m + BLOCK_M, seqlen)
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn,
                                    offs_m, offs_d, d_mask, seqlen, start_m, hi, qk_scale,
                                    BLOCK_N, True, False)
    else:
        acc, l_i, m_i = _attn_block(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_vn,
                                    offs_m, offs_d, d_mask, seqlen, 0, seqlen, qk_scale,
                                    BLOCK_N, False, EVEN_N)
    out = acc / l_i[:, None]
    tl.store(O + bh * stride_oh + offs_m[:, None] * stride_om + offs_d[None, :],
             out.to(O.dtype.element_ty), mask=m_mask[:, None] & d_mask[None, :])


def _config(cuda: bool, block_d: int) -> dict:
    """Fixed tiles: small ones for the CPU interpreter, FA2-like ones on Hopper (no autotune)."""
    if not cuda:
        return dict(BLOCK_M=16, BLOCK_N=16, num_warps=4, num_stages=1)
    # Chosen from an sm_90 compile without a GPU: the largest tiles with no register spills.
    if block_d <= 64:
        return dict(BLOCK_M=128, BLOCK_N=64, num_warps=8, num_stages=3)
    return dict(BLOCK_M=128, BLOCK_N=32, num_warps=8, num_stages=3)


def _flash(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    batch, heads, seqlen, head_dim = q.shape
    q, k, v = (t.reshape(batch * heads, seqlen, head_dim).contiguous() for t in (q, k, v))
    out = torch.empty_like(q)
    block_d = max(16, triton.next_power_of_2(head_dim))
    cfg = _config(q.is_cuda, block_d)
    grid = (triton.cdiv(seqlen, cfg["BLOCK_M"]), batch * heads)
    _attn_fwd[grid](q, k, v, out, q.stride(0), q.stride(1), k.stride(0), k.stride(1),
                    v.stride(0), v.stride(1), out.stride(0), out.stride(1), seqlen, head_dim,
                    _LOG2E / math.sqrt(head_dim), BLOCK_D=block_d, CAUSAL=causal,
                    EVEN_N=seqlen % cfg["BLOCK_N"] == 0, **cfg)
    return out.view(batch, heads, seqlen, head_dim)


def flash_attention(q, k, v):
    """Kernel: fused non-causal attention forward."""
    return _flash(q, k, v, causal=False)


def flash_attention_causal(q, k, v):
    """Kernel: fused causal attention forward."""
    return _flash(q, k, v, causal=True)
