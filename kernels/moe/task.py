"""Mixture-of-experts task: tokens, their routing, the experts' weights, the float64 reference,
and a grouped GEMM over experts as the baseline.

One expert projection of an MoE layer: every token t is routed to ``topk`` of ``experts``
experts (``ids``, distinct per token, drawn from the seed: the routing itself is not the claim),
and each (token, slot) pair computes y[t, j] = x[t] W[ids[t, j]]^T, with W (experts, N, K) in
PyTorch's linear layout. The output is (tokens, topk, N); combining the slots with the router's
weights comes after the second projection and is left out. The reference computes every pair in
float64. The baseline, ``grouped_mm``, is what a practitioner runs today without a custom
kernel, the form torchtitan's MoE uses: sort the pairs by expert, gather their rows of x into one
contiguous matrix, one ``torch._grouped_mm`` over all experts (a CUTLASS grouped GEMM on sm90 in
bf16), and scatter the rows back. The fused kernel, in ``kernel.py``, does the same matrix work
with the gather folded into its loads and the scatter into its stores.
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


def grouped_mm(x: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Baseline: pairs sorted by expert, gathered rows, one ``torch._grouped_mm``, rows scattered back.

    No host synchronization in bf16 on sm90: the counts come from ``scatter_add_`` into a
    fixed-size vector (``torch.bincount`` reads the largest id back to the host on CUDA; torchtitan
    counts with ``histc`` for the same reason), and ``_grouped_mm`` takes the group ends as a
    device tensor.
    An expert nobody chose is an empty group (two equal ends). ``_grouped_mm`` checks 16-byte
    strides on every device: K a multiple of 8 in bf16 (4 in float32); N a multiple of 8 keeps its
    CUDA output unpadded. Other dtypes than bf16, and other GPUs than sm90/sm100, take PyTorch's
    per-group fallback (mm per expert, with a host read of ``offs``): correct, not fast.
    """
    tokens, topk = ids.shape
    experts = w.shape[0]
    flat = ids.reshape(-1).to(torch.int64)
    order = torch.argsort(flat, stable=True)               # pair indices, grouped by expert
    counts = torch.zeros(experts, dtype=torch.int64, device=flat.device)
    counts.scatter_add_(0, flat, torch.ones_like(flat))
    offs = torch.cumsum(counts, 0).to(torch.int32)          # each group's end row
    a = x[order // topk]                                    # (tokens * topk, K), the gathered copy
    out = torch._grouped_mm(a, w.transpose(-2, -1), offs=offs)
    y = torch.empty((tokens * topk, w.shape[1]), device=x.device, dtype=x.dtype)
    y.index_copy_(0, order, out)
    return y.view(tokens, topk, -1)


def reference_fp64(x: torch.Tensor, w: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Every (token, slot) pair in float64, one expert at a time, on the inputs' device."""
    x64, w64 = x.detach().to(torch.float64), w.detach().to(torch.float64)
    y = torch.zeros((ids.shape[0], ids.shape[1], w.shape[1]), device=x.device, dtype=torch.float64)
    for e in range(w.shape[0]):
        t, j = torch.nonzero(ids == e, as_tuple=True)
        y[t, j] = x64[t] @ w64[e].T
    return y
