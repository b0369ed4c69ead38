"""Mixture-of-experts task: tokens, their routing, the experts' weights, the float64 reference,
and the loop over experts as the baseline.

One expert projection of an MoE layer: every token t is routed to ``topk`` of ``experts``
experts (``ids``, distinct per token, drawn from the seed: the routing itself is not the claim),
and each (token, slot) pair computes y[t, j] = x[t] W[ids[t, j]]^T, with W (experts, N, K) in
PyTorch's linear layout. The output is (tokens, topk, N); combining the slots with the router's
weights comes after the second projection and is left out. The reference computes every pair in
float64. The baseline, ``expert_loop``, is the loop a model's first MoE implementation usually
has (one expert at a time: find its tokens, gather them, one GEMM, scatter the result back),
named as such in the claim's title. The fused kernel is in ``kernel.py``.
"""

from __future__ import annotations

import torch


def make_inputs(*, seed: int, device: str, dtype: str, tokens: int, experts: int, topk: int, K: int, N: int):
    """x (tokens, K), W (experts, N, K) scaled by 1/sqrt(K), ids (tokens, topk) int32."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn((tokens, K), generator=g)
    w = torch.randn((experts, N, K), generator=g) / K ** 0.5
    ids = torch.rand((tokens, experts), generator=g).argsort(dim=1)[:, :topk].to(torch.int32)
    return x.to(device=device, dtype=dt), w.to(device=device, dtype=dt), ids.to(device)


def expert_loop(x: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Baseline: for each expert, its (token, slot) pairs, a gather, one GEMM, a scatter."""
    tokens, topk = ids.shape
    y = torch.empty((tokens, topk, w.shape[1]), device=x.device, dtype=x.dtype)
    for e in range(w.shape[0]):
        t, j = torch.nonzero(ids == e, as_tuple=True)
        if t.numel():
            y[t, j] = torch.nn.functional.linear(x[t], w[e])
    return y


def reference_fp64(x: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Every (token, slot) pair in float64, one expert at a time, on the inputs' device."""
    x64, w64 = x.detach().to(torch.float64), w.detach().to(torch.float64)
    y = torch.zeros((ids.shape[0], ids.shape[1], w.shape[1]), device=x.device, dtype=torch.float64)
    for e in range(w.shape[0]):
        t, j = torch.nonzero(ids == e, as_tuple=True)
        y[t, j] = x64[t] @ w64[e].T
    return y
