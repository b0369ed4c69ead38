"""Decode attention over a 4-bit KV cache (KIVI's layout), dequantized in registers, in Triton.

List entry: *KIVI*. KIVI stores the KV cache in 2 bits, keys quantized per channel and values per
token (``task.py`` explains the layout; this kernel reads its 4-bit variant). Decode attention is
memory-bound, so the time is the cache's bytes: 4-bit codes are a quarter of bf16's, plus small
scales. The kernel is the grouped-query decode of ``kernels/gqa_decode/decode.py`` (one program
per (sequence, KV head), the group's query heads as a tile against each block of keys, online
softmax) with the loads replaced: each 64-token tile reads packed int32 words (eight 4-bit codes,
channels 8w..8w+7 in word w), unpacks them with a shift and a mask, applies the tile's key scale
and zero per channel (one key group per tile) or each token's value scale and zero, and feeds
bf16 tiles to ``tl.dot``. A code is unpacked once per program and used by all G query heads.

Bytes, and the claimed speedup (implementer report; docs/sources.md). Workload: batch 64, 32 query
heads on 8 KV heads, 4096 tokens, head dim 128 (as the GQA claim).
* bf16 cache: 2 B per element, 1.07 GB of K and V.
* 4-bit cache: 0.5 B per element, plus fp16 key scale and zero per 64 tokens per channel
  (0.0625 B per element) and fp16 value scale and zero per token (0.031 B per element):
  0.59 B per element, 0.32 GB. Byte ratio 3.4.
* Unpacking costs about five instructions per element on the SM (shift, mask, convert, fused
  multiply-add with scale and zero, convert to bf16), once per program. At the copy rate measured
  on one H200, 4.3 TB/s / 0.59 B = 7.3e12 elements/s would have to be unpacked, 36e12
  instructions/s, close to the SMs' issue rate for integer and conversion work; the kernel can be
  issue-bound rather than memory-bound, which only the GPU can tell. If it runs at half the copy
  rate's element throughput it still reads its cache 1.7x faster than the bf16 kernel at full
  bandwidth efficiency.
* **Claimed 1.6**, tolerance 0.1: the bf16 decode at the same bandwidth efficiency as the 4-bit
  one would give 3.4; the claim holds while the 4-bit kernel keeps at least 43% of the elements
  per second the bf16 kernel achieves from the same HBM.

On CPU the interpreter runs the same unpacking, scaling and online softmax at small tiles
(16-token tiles inside 64-token key groups) and at the GPU's 64-token tiles
(tests/kernels/test_gpu_tiles.py); head_dim is 128 (the kernel unpacks 16 words per row). Only
the GPU measures the speed.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from kernels.kivi_decode.task import GROUP, quantize_kv
from kernels.launch import gpu_tiles

_LOG2E = 1.4426950408889634
GPU_CONFIG = dict(BLOCK_N=64, num_warps=4, num_stages=3)
CPU_CONFIG = dict(BLOCK_N=16, num_warps=4, num_stages=1)
HEAD_DIM = 128


@triton.jit
def _unpack(words, BLOCK_N: tl.constexpr, WORDS: tl.constexpr):
    """(BLOCK_N, WORDS) int32 -> (BLOCK_N, 8 * WORDS) float32 codes, channel 8w + s from nibble s."""
    shifts = tl.arange(0, 8) * 4
    codes = (words[:, :, None] >> shifts[None, None, :]) & 0xF
    return tl.reshape(codes, (BLOCK_N, 8 * WORDS)).to(tl.float32)


@triton.jit
def _kivi_kernel(Q, Kp, Ks, Kz, Vp, Vs, Vz, O, stride_qb, stride_qh, stride_kb, stride_kh, stride_kn,
                 stride_sb, stride_sh, stride_sg, stride_vb, stride_vh, stride_vn, stride_tb, stride_th,
                 stride_ob, stride_oh, seqlen, group, qk_scale,
                 KGROUP: tl.constexpr, BLOCK_G: tl.constexpr, BLOCK_N: tl.constexpr, D: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    kvh = tl.program_id(1).to(tl.int64)
    WORDS: tl.constexpr = D // 8
    offs_g = tl.arange(0, BLOCK_G)
    offs_d = tl.arange(0, D)
    offs_w = tl.arange(0, WORDS)
    g_mask = offs_g < group
    qh = kvh * group + offs_g
    q = tl.load(Q + b * stride_qb + qh[:, None] * stride_qh + offs_d[None, :], mask=g_mask[:, None], other=0.0)
    kp_base = Kp + b * stride_kb + kvh * stride_kh
    vp_base = Vp + b * stride_vb + kvh * stride_vh
    m_i = tl.full([BLOCK_G], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_G], tl.float32)
    acc = tl.zeros([BLOCK_G, D], tl.float32)
    for start_n in range(0, seqlen, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        n_mask = offs_n < seqlen
        kw = tl.load(kp_base + offs_n[:, None] * stride_kn + offs_w[None, :], mask=n_mask[:, None], other=0)
        grp = start_n // KGROUP  # BLOCK_N divides KGROUP: one key group per tile
        sbase = b * stride_sb + kvh * stride_sh + grp * stride_sg
        ks = tl.load(Ks + sbase + offs_d).to(tl.float32)
        kz = tl.load(Kz + sbase + offs_d).to(tl.float32)
        k = (_unpack(kw, BLOCK_N, WORDS) * ks[None, :] + kz[None, :]).to(q.dtype)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        s = tl.where(n_mask[None, :], s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        vw = tl.load(vp_base + offs_n[:, None] * stride_vn + offs_w[None, :], mask=n_mask[:, None], other=0)
        tbase = b * stride_tb + kvh * stride_th + offs_n
        vs = tl.load(Vs + tbase, mask=n_mask, other=0.0).to(tl.float32)
        vz = tl.load(Vz + tbase, mask=n_mask, other=0.0).to(tl.float32)
        v = (_unpack(vw, BLOCK_N, WORDS) * vs[:, None] + vz[:, None]).to(q.dtype)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(O + b * stride_ob + qh[:, None] * stride_oh + offs_d[None, :],
             (acc / l_i[:, None]).to(O.dtype.element_ty), mask=g_mask[:, None])


def _pack(codes: torch.Tensor) -> torch.Tensor:
    """uint8 codes (..., D) -> int32 words (..., D / 8), nibble s of word w = channel 8w + s."""
    c = codes.to(torch.int64).view(*codes.shape[:-1], codes.shape[-1] // 8, 8)
    words = (c << (torch.arange(8, device=codes.device) * 4)).sum(dim=-1)
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32).contiguous()


def quantize_cache(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Kernel prepare (untimed): the packed 4-bit cache, its scales and zeros, and q."""
    if k.shape[-1] != HEAD_DIM:
        raise ValueError(f"the 4-bit decode kernel is written for head_dim {HEAD_DIM}, got {k.shape[-1]}")
    kcode, ks, kz, vcode, vs, vz = quantize_kv(k, v)
    return q.contiguous(), _pack(kcode), ks.contiguous(), kz.contiguous(), _pack(vcode), vs.contiguous(), vz.contiguous()


def kivi_decode(q, kp, ks, kz, vp, vs, vz):
    """Kernel: grouped-query decode reading the 4-bit cache."""
    batch, q_heads, head_dim = q.shape
    kv_heads, seqlen = kp.shape[1], kp.shape[2]
    group = q_heads // kv_heads
    if group * kv_heads != q_heads:
        raise ValueError("q_heads must be a multiple of kv_heads")
    cfg = GPU_CONFIG if gpu_tiles(q) else CPU_CONFIG
    if GROUP % cfg["BLOCK_N"]:
        raise ValueError("a tile must not straddle two key groups")
    out = torch.empty_like(q)
    _kivi_kernel[(batch, kv_heads)](
        q, kp, ks, kz, vp, vs, vz, out, q.stride(0), q.stride(1), kp.stride(0), kp.stride(1),
        kp.stride(2), ks.stride(0), ks.stride(1), ks.stride(2), vp.stride(0), vp.stride(1),
        vp.stride(2), vs.stride(0), vs.stride(1), out.stride(0), out.stride(1), seqlen, group,
        _LOG2E / math.sqrt(head_dim), KGROUP=GROUP, BLOCK_G=max(16, triton.next_power_of_2(group)),
        D=HEAD_DIM, **cfg)
    return out
