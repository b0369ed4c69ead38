"""Fused attention forward in Triton, FlashAttention-2 style.

List entries: *FlashAttention* (the claims against eager attention: the score matrix never
reaches HBM) and *FlashAttention-2* (the claims against FlashAttention-2's own CUDA kernel and
cuDNN, through ``scaled_dot_product_attention``: how much of a tuned kernel's rate a plain Triton
version of the same algorithm keeps).

Mechanism. Each program owns BLOCK_M query rows of one (batch, head) and streams K and V in
BLOCK_N-row blocks. The softmax is online: a running row maximum ``m`` and normalizer ``l``
rescale the output accumulator whenever a block raises the maximum, and the division by ``l``
happens once at the end (FlashAttention-2: fewer non-matmul FLOPs, parallel over query blocks as
well as heads). The N x N score matrix lives only in registers, one BLOCK_M x BLOCK_N tile at a
time. Causal attention skips every KV block above the diagonal and masks only the diagonal
blocks, so it does half the work. The inputs, the float64 reference and the baselines are in
``task.py``.

The numbers (facts and their sources: docs/sources.md). Workload: batch 4, 32 heads, 4096
tokens, head dim 64, bf16; forward FLOPs 4 * B * H * N^2 * D = 5.5e11 (causal 2.75e11).

* Eager attention (``task.materialized_attention``), each op costed as the larger of its bytes
  over the measured 4.3 TB/s (bytes read plus written) and its FLOPs over the measured
  790 TFLOP/s, on one H200. The score matrix S is B*H*N^2 = 2^31 bf16 elements, 4.29 GB.
  - ``q * scale``: 67 MB read and written, 0.03 ms.
  - ``Q K^T``: reads Q and K (0.13 GB), writes S (4.29 GB): 1.03 ms of traffic against 0.35 ms of
    matmul (2.75e11 FLOP); 1.03 ms.
  - ``softmax``: reads and writes S: 8.6 GB, 2.0 ms.
  - ``P V``: reads P (4.29 GB) and V, writes O: 1.03 ms against 0.35 ms of matmul; 1.03 ms.
  Non-causal total 4.1 ms. Causal adds an in-place ``masked_fill_`` over S (8.6 GB, 2.0 ms):
  6.1 ms. (FlashAttention-3's Figure 5 measured PyTorch's standard attention at this very shape
  on an H100 at 72 TFLOP/s non-causal, 7.6 ms, with less bandwidth than the H200: the model is
  if anything generous to the baseline.)
* The fused kernel is compute-bound (N / 2 = 2048 FLOP per byte of Q, K, V and O), so its time
  is its FLOPs over its own matrix rate R, which only the GPU can measure. The anchor is a Hopper
  measurement of this algorithm in Triton at this exact shape: 400 TFLOP/s non-causal and 363
  causal on an H100 SXM5 (FlashAttention-3, Figure 5, "Triton"; the H200 has the same GH100 chip,
  SMs and clocks, and this workload is compute-bound, so the rate carries over). That kernel was
  autotuned; ours keeps a fraction f of it:
  - pointer loads with masks instead of TMA loads: the plain pointer-load Triton GEMM ran at
    1 / 1.13 = 0.88 of its TMA variant in 16-bit on an H100 (triton-lang/triton PR 5461, the same
    factor kernels/matmul/kernel.py uses);
  - one fixed configuration (128x64 tiles, 8 warps, 3 stages; 128x32 above head dim 64), no
    autotuning over the tutorial's block sizes, stages and warps: no published figure isolates
    this; we allow it a further 0.75.
  Estimate f = 0.88 x 0.75 = 0.66, R = 264 non-causal and 240 causal. We claim what holds at
  f = 0.5, R = 200 and 182 TFLOP/s, well under the estimate, and each tolerance keeps the claim
  verified down to about f = 0.42 (the Triton tutorial's own table, 161 and 150 TFLOP/s, is no
  longer used: its page does not name the GPU):
  - against eager, non-causal: 5.50e11 / 200e12 = 2.75 ms against 4.1 ms: 1.49. **Claimed 1.45**,
    tolerance 0.1: threshold 1.305, verified while our time is under 4.1 / 1.305 = 3.14 ms,
    R >= 175 (f >= 0.44). At the estimate, f = 0.66, it would be 1.97.
  - against eager, causal: 2.75e11 / 182e12 = 1.51 ms against 6.1 ms: 4.0. **Claimed 4.0**,
    tolerance 0.1: threshold 3.6, R >= 2.75e11 / (6.1 ms / 3.6) = 162 (f >= 0.45).
  - against SDPA's flash backend (FlashAttention-2's CUDA kernel; 321 TFLOP/s non-causal and 284
    causal at this shape on an H100, same figure): 200 / 321 = 0.62 and 182 / 284 = 0.64.
    **Claimed 0.6** for both, tolerance 0.15: threshold 0.51, R >= 164 and 145 (f >= 0.41 and
    0.40).
  - against SDPA's cuDNN backend (Hopper's fastest path in PyTorch; 408 and 363 TFLOP/s in the
    same figure): 200 / 408 = 0.49 and 182 / 363 = 0.50. **Claimed 0.49 and 0.5**, tolerance
    0.15: thresholds 0.417 and 0.425, R >= 170 and 154 (f >= 0.43 and 0.42).
  History: until 2026-12-04 these claims took R = 160 and 150 from the Triton tutorial's table
  (GPU not stated) and claimed 1.15, 3.0, 0.5, 0.5, 0.39 and 0.4.
  The FlashAttention-2 paper's "up to 335 TFLOP/s on H100" is a forward-plus-backward figure and
  is not used. Both sides of the SDPA claims run on the same GPU, so the ratio carries over from
  the H100 to the H200 as long as both stay compute-bound, which they do.

What only the GPU check covers. On CPU the interpreter runs this same kernel (online softmax,
masks, causal split, ragged tails) at 16x16 tiles in float32, and at the GPU's 128x64 and 128x32
tiles in tests/kernels/test_gpu_tiles.py; tests/kernels/test_triton_sm90.py compiles the bf16
128x64 variants for sm_90 (wgmma, no spills). bf16 accuracy and every timing need an H100/H200.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles

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
    cfg = _config(gpu_tiles(q), block_d)
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
