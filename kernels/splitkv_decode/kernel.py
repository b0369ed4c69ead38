"""Split-KV decode attention (FlashDecoding-style) in Triton, against the same decode in one pass.

List entry: *FlashInfer*. In decode every sequence brings one query token per head and attends
over its whole KV cache. A single-pass kernel gives each (sequence, KV head) one program that
streams the cache from start to end (``kernels/gqa_decode/decode.py``). With few sequences and a
long context that is a handful of programs for a GPU of 132 SMs: at batch 1 and 8 KV heads, 8
programs, so 124 SMs idle while 8 of them stream the whole cache. FlashInfer's scheduler (and
FlashDecoding before it) splits each sequence's KV range into chunks processed by separate
programs, then merges the partial results exactly: each chunk returns its normalized output o_s
and the log-sum-exp of its scores lse_s, and the merge weighs o_s by exp(lse_s - max lse). This
kernel does that: ``_split_kernel`` runs one program per (sequence, KV head, 2048-token chunk),
with the grouped-query tile of ``decode.py`` (the group's query heads against each K block
through ``tl.dot``), and ``_combine_kernel`` merges the chunks of each query head. The inputs,
the reference and the expanded-cache machinery are the decode task's
(``kernels/gqa_decode/task.py``); the baseline is the single-pass GQA kernel
(``kernels/gqa_decode/kernel.py``).

Workload: batch 1, 32 query heads on 8 KV heads, 131072 cached tokens (a 128K-context request),
head dim 128, bf16: K and V are 2 * 8 * 131072 * 128 * 2 B = 537 MB, read once by either side.

Derivation of the claimed speedup (implementer report; docs/sources.md).
* Split-KV: 64 chunks x 8 KV heads = 512 programs, 3.9 per SM: the cache streams at a fraction
  eta of the 4.3 TB/s copy rate measured on one H200; at eta = 0.8, 156 us. The merge reads
  32 heads x 64 chunks x 128 floats (1 MB): noise.
* Single pass: 8 programs, so 8 SMs stream 67 MB each. Its time is 537 MB / (8 b), with b what
  one SM can stream alone, which only the GPU can measure. It is bounded by how many bytes one
  program keeps in flight (three 32 KB stages of K and V) over the memory latency, and by the
  SM's own load path; it is not the 4.3 TB/s / 132 = 33 GB/s average share, because an SM alone
  gets more than its share.
* Speedup = eta * 4.3 TB/s / (8 b). **Claimed 1.5**, tolerance 0.1: verified as long as one SM
  streaming alone stays below 0.8 * 4300 / (8 * 1.35) = 320 GB/s, ten times its average share of
  the copy rate. (Three 32 KB stages in flight over a memory latency near a microsecond would
  allow about 96 GB/s; the latency is not measured here.) If one SM streamed at 100 GB/s the
  speedup would be 4.3.

On CPU the interpreter runs the split, the per-chunk online softmax, the ragged last chunk and
tile, and the merge at small tiles (16-token tiles, 64-token chunks) and at the GPU's (64, 2048)
in tests/kernels/test_gpu_tiles.py. Only the GPU measures the speed.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles

_LOG2E = 1.4426950408889634
GPU_CONFIG = dict(BLOCK_N=64, CHUNK=2048, num_warps=4, num_stages=3)
CPU_CONFIG = dict(BLOCK_N=16, CHUNK=64, num_warps=4, num_stages=1)


@triton.jit
def _split_kernel(Q, K, V, Opart, Lse, stride_qb, stride_qh, stride_kb, stride_kh, stride_kn,
                  stride_vb, stride_vh, stride_vn, seqlen, head_dim, group, q_heads, num_splits,
                  qk_scale, CHUNK: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_D: tl.constexpr):
    """One (sequence, KV head, chunk): normalized partial output and log2-sum-exp per query head."""
    b = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1).to(tl.int64)
    split = tl.program_id(2)
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, BLOCK_D)
    g_mask = offs_g < group
    d_mask = offs_d < head_dim
    qh = kvh * group + offs_g
    q = tl.load(Q + b * stride_qb + qh[:, None] * stride_qh + offs_d[None, :],
                mask=g_mask[:, None] & d_mask[None, :], other=0.0)
    k_base = K + b * stride_kb + kvh * stride_kh
    v_base = V + b * stride_vb + kvh * stride_vh
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, BLOCK_D], tl.float32)
    lo = split * CHUNK
    hi = tl.minimum(lo + CHUNK, seqlen)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_mask = offs_n < hi
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
    row = (b * q_heads + qh) * num_splits + split
    tl.store(Opart + row[:, None] * head_dim + offs_d[None, :], acc / l_i[:, None],
             mask=g_mask[:, None] & d_mask[None, :])
    tl.store(Lse + row, m_i + tl.log2(l_i), mask=g_mask)


@triton.jit
def _combine_kernel(Opart, Lse, Out, stride_ob, stride_oh, q_heads, num_splits, head_dim,
                    BLOCK_S: tl.constexpr, BLOCK_D: tl.constexpr):
    """Merge one query head's chunks: weights 2^(lse_s - max lse), normalized."""
    bh = tl.program_id(0).to(tl.int64)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    s_mask = offs_s < num_splits
    d_mask = offs_d < head_dim
    lse = tl.load(Lse + bh * num_splits + offs_s, mask=s_mask, other=float("-inf"))
    w = tl.where(s_mask, tl.exp2(lse - tl.max(lse, 0)), 0.0)
    o = tl.load(Opart + (bh * num_splits + offs_s)[:, None] * head_dim + offs_d[None, :],
                mask=s_mask[:, None] & d_mask[None, :], other=0.0)
    out = tl.sum(w[:, None] * o, 0) / tl.sum(w, 0)
    b, h = bh // q_heads, bh % q_heads
    tl.store(Out + b * stride_ob + h * stride_oh + offs_d, out.to(Out.dtype.element_ty), mask=d_mask)


def splitkv_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Kernel: decode attention with the KV range split into chunks, then merged."""
    batch, q_heads, head_dim = q.shape
    kv_heads, seqlen = k.shape[1], k.shape[2]
    group = q_heads // kv_heads
    if group * kv_heads != q_heads or tuple(v.shape) != tuple(k.shape):
        raise ValueError("q_heads must be a multiple of kv_heads, and K and V must match")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    cfg = dict(GPU_CONFIG if gpu_tiles(q) else CPU_CONFIG)
    chunk = cfg.pop("CHUNK")
    splits = max(1, triton.cdiv(seqlen, chunk))
    opart = torch.empty((batch * q_heads * splits, head_dim), device=q.device, dtype=torch.float32)
    lse = torch.empty((batch * q_heads * splits,), device=q.device, dtype=torch.float32)
    block_g = max(16, triton.next_power_of_2(group))
    block_d = max(16, triton.next_power_of_2(head_dim))
    _split_kernel[(batch, kv_heads, splits)](
        q, k, v, opart, lse, q.stride(0), q.stride(1), k.stride(0), k.stride(1), k.stride(2),
        v.stride(0), v.stride(1), v.stride(2), seqlen, head_dim, group, q_heads, splits,
        _LOG2E / math.sqrt(head_dim), CHUNK=chunk, BLOCK_G=block_g, BLOCK_D=block_d, **cfg)
    out = torch.empty_like(q)
    _combine_kernel[(batch * q_heads,)](opart, lse, out, out.stride(0), out.stride(1), q_heads,
                                        splits, head_dim, BLOCK_S=triton.next_power_of_2(splits),
                                        BLOCK_D=block_d)
    return out
