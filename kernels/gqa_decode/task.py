"""Decode-attention task: one query token per head against a KV cache, the float64 reference,
and multi-head decode over an expanded cache as the baseline.

q is (batch, q_heads, head_dim); K and V are (batch, kv_heads, seqlen, head_dim), with q_heads a
multiple G of kv_heads (grouped-query attention). The reference attends query head h to KV head
h // G in float64. The baseline's untimed ``expand_kv`` copies every KV head to each query head of
its group, as a model that ignores grouping would store it; ``mha_decode`` then runs the shared
Triton decode kernel (``decode.py``) with G = 1 (GPU claim) and ``mha_decode_torch`` runs torch
matmuls (CPU claim). The paged, split-KV, KV-quantization and latent-attention decode claims
reuse these inputs. The kernels are ``kernel.py`` (Triton) and ``cpu.py`` (torch).
"""

from __future__ import annotations

import math

import torch


def make_inputs(*, seed: int, device: str, dtype: str, batch: int, q_heads: int, kv_heads: int,
                seqlen: int, head_dim: int):
    """q (batch, q_heads, head_dim); K and V caches (batch, kv_heads, seqlen, head_dim)."""
    if q_heads % kv_heads:
        raise ValueError("q_heads must be a multiple of kv_heads")
    gen = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    q = torch.randn(batch, q_heads, head_dim, generator=gen)
    k = torch.randn(batch, kv_heads, seqlen, head_dim, generator=gen)
    v = torch.randn(batch, kv_heads, seqlen, head_dim, generator=gen)
    return tuple(t.to(device=device, dtype=dt) for t in (q, k, v))


# Bytes of the float64 cache one step of a decode reference holds: at full size (64 x 8 x 4096
# x 128) the whole float64 K and V are 4.3 GB; a step of batch rows keeps them near 256 MiB.
REFERENCE_CHUNK_BYTES = 1 << 28


def grouped_decode_fp64(q, k, v, *, cache64=None, chunk_bytes: int = REFERENCE_CHUNK_BYTES):
    """Grouped decode attention in float64 on the inputs' device, a few batch rows at a time:
    query head h reads KV head h // G. ``cache64(k, v)`` turns a batch slice of the cache into
    its float64 K and V (a cast where not given); each row's math is independent of the others,
    so the slices give the unsliced result."""
    batch, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    per_row = 16 * k[:1].numel() or 1  # float64 K and V of one batch row
    step = max(1, chunk_bytes // per_row)
    out = torch.empty((batch, q_heads, v.shape[-1]), dtype=torch.float64, device=q.device)
    for b0 in range(0, batch, step):
        b1 = min(batch, b0 + step)
        kb, vb = cache64(k[b0:b1], v[b0:b1]) if cache64 else (t[b0:b1].to(torch.float64) for t in (k, v))
        qg = q[b0:b1].to(torch.float64).reshape(b1 - b0, kv_heads, q_heads // kv_heads, head_dim)
        s = torch.einsum("bkgd,bknd->bkgn", qg, kb) / math.sqrt(head_dim)  # no G-fold copy of the cache
        out[b0:b1] = torch.einsum("bkgn,bknd->bkgd", torch.softmax(s, dim=-1), vb).reshape(b1 - b0, q_heads, -1)
    return out


def reference_fp64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Grouped decode attention in float64."""
    return grouped_decode_fp64(q, k, v)


def expand_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Baseline prepare (untimed): copy each KV head to every query head of its group."""
    group = q.shape[1] // k.shape[1]
    return q, k.repeat_interleave(group, dim=1).contiguous(), v.repeat_interleave(group, dim=1).contiguous()


def mha_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Baseline (GPU claim): the shared Triton decode kernel as multi-head decode (G = 1) over
    the expanded cache."""
    from kernels.gqa_decode.decode import decode
    return decode(q, k, v)


def mha_decode_torch(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Baseline (CPU claim): multi-head decode, one (1, D) query per head over its own KV copy."""
    batch, q_heads, head_dim = q.shape
    qs = q.reshape(batch, q_heads, 1, head_dim) * (1.0 / math.sqrt(head_dim))
    scores = torch.matmul(qs, k.transpose(-1, -2))
    return torch.matmul(torch.softmax(scores, dim=-1), v).reshape(batch, q_heads, head_dim)
