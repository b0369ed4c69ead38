"""Attention task: Q, K, V, the float64 reference, and the baselines a practitioner would call.

Forward attention softmax(Q K^T / sqrt(d)) V over (batch, heads, seqlen, head_dim) tensors,
non-causal and causal. Baselines: eager PyTorch with the score matrix in memory (the naive
version the FlashAttention papers start from, named as such in the claims' titles), and what a
practitioner calls: ``scaled_dot_product_attention`` pinned to its FlashAttention-2 backend or
to its cuDNN backend. The fused Triton kernel and the derivation of every claimed value are in
``kernel.py``.
"""

from __future__ import annotations

import math

import torch


def make_inputs(*, seed: int, device: str, dtype: str, batch: int, heads: int, seqlen: int,
                head_dim: int):
    """Q, K, V of shape (batch, heads, seqlen, head_dim), standard normal."""
    gen = torch.Generator().manual_seed(seed)
    shape = (batch, heads, seqlen, head_dim)
    return tuple(torch.randn(shape, generator=gen).to(device=device, dtype=getattr(torch, dtype))
                 for _ in range(3))


# Bytes of float64 scores one step of a reference holds (softmax and the mask add about two more
# such buffers): 256 MiB, so a reference's peak stays near 1 GiB on any device whatever the
# sequence length. The whole (batch, heads, seqlen, seqlen) float64 score matrix is 17 GB at the
# shipped attention claims' size (4 x 32 x 4096^2 x 8 B) and 69 GB at block-sparse's
# (32 x 16384^2 x 8 B).
REFERENCE_CHUNK_BYTES = 1 << 28


def attention_fp64(q, k, v, *, causal: bool = False, allowed=None,
                   chunk_bytes: int = REFERENCE_CHUNK_BYTES):
    """softmax(Q K^T / sqrt(d)) V in float64 on the inputs' device, a block of query rows of a
    group of heads at a time, so no step holds more than ``chunk_bytes`` of scores and no
    (seqlen x seqlen) matrix exists at full size. ``causal`` lets query i see keys 0..i;
    ``allowed(b, r0, r1)``, where given, is the boolean (r1 - r0, keys) mask of batch ``b``'s
    query rows r0..r1, shared by its heads. Every row keeps at least one key in the shipped
    claims; a row with none would be NaN, as in the unchunked formula."""
    batch, heads, n_q, dim = q.shape
    n_k = k.shape[-2]
    out = torch.empty((batch, heads, n_q, v.shape[-1]), dtype=torch.float64, device=q.device)
    rows = max(1, min(n_q, chunk_bytes // (8 * max(n_k, 1))))
    group = max(1, min(heads, chunk_bytes // (8 * max(n_k, 1) * rows)))
    scale = 1.0 / math.sqrt(dim)
    keys = torch.arange(n_k, device=q.device)
    for b in range(batch):
        for h0 in range(0, heads, group):
            h1 = min(heads, h0 + group)
            kh, vh = (t[b, h0:h1].to(torch.float64) for t in (k, v))
            for r0 in range(0, n_q, rows):
                r1 = min(n_q, r0 + rows)
                s = (q[b, h0:h1, r0:r1].to(torch.float64) @ kh.transpose(-2, -1)) * scale
                keep = allowed(b, r0, r1) if allowed is not None else None
                if causal:
                    below = keys[None, :] <= torch.arange(r0, r1, device=q.device)[:, None]
                    keep = below if keep is None else keep & below
                if keep is not None:
                    s = s.masked_fill(~keep, float("-inf"))
                out[b, h0:h1, r0:r1] = torch.softmax(s, dim=-1) @ vh
    return out


def reference_fp64(q, k, v):
    """Non-causal attention in float64."""
    return attention_fp64(q, k, v)


def reference_fp64_causal(q, k, v):
    """Causal attention in float64."""
    return attention_fp64(q, k, v, causal=True)


def _materialized(q, k, v, causal: bool):
    s = torch.matmul(q * (1.0 / math.sqrt(q.shape[-1])), k.transpose(-2, -1))
    if causal:
        n = q.shape[-2]
        s.masked_fill_(torch.ones(n, n, dtype=torch.bool, device=q.device).triu_(1), float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def materialized_attention(q, k, v):
    """Baseline: eager softmax(Q K^T / sqrt(d)) V with the score matrix in memory."""
    return _materialized(q, k, v, causal=False)


def materialized_attention_causal(q, k, v):
    """Baseline: eager causal attention (score matrix in memory, masked_fill above the diagonal)."""
    return _materialized(q, k, v, causal=True)


def _sdpa(q, k, v, causal: bool, backend: str = "FLASH_ATTENTION"):
    """SDPA pinned to one backend on CUDA. cuDNN has no CPU kernel, so on CPU (the correctness
    check only, never timed) the cuDNN baselines run SDPA's CPU flash kernel instead."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    if not q.is_cuda:
        backend = "FLASH_ATTENTION"
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)


def sdpa_flash(q, k, v):
    """Baseline: torch scaled_dot_product_attention pinned to its flash backend."""
    return _sdpa(q, k, v, causal=False)


def sdpa_flash_causal(q, k, v):
    """Baseline: causal scaled_dot_product_attention pinned to its flash backend."""
    return _sdpa(q, k, v, causal=True)


def sdpa_cudnn(q, k, v):
    """Baseline: scaled_dot_product_attention pinned to its cuDNN backend (Hopper's fastest)."""
    return _sdpa(q, k, v, causal=False, backend="CUDNN_ATTENTION")


def sdpa_cudnn_causal(q, k, v):
    """Baseline: causal scaled_dot_product_attention pinned to its cuDNN backend."""
    return _sdpa(q, k, v, causal=True, backend="CUDNN_ATTENTION")
