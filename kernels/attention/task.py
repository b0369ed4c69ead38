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


def _reference(q, k, v, causal: bool):
    q, k, v = (t.detach().to("cpu", torch.float64) for t in (q, k, v))
    s = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


def reference_fp64(q, k, v):
    """Non-causal attention in float64."""
    return _reference(q, k, v, causal=False)


def reference_fp64_causal(q, k, v):
    """Causal attention in float64."""
    return _reference(q, k, v, causal=True)


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
