"""Tensor-parallel linear task: each rank's shard of a row-parallel linear layer, the float64
reference, and the same layer on one GPU as the baseline.

Y = X W with X (M, K) and W (K, N). Row parallelism (Megatron-LM) splits the contraction
dimension K across the ranks: rank r holds X[:, r-th slice] and W[r-th slice, :], the shards a
column-parallel layer before it would have left there, and Y is the sum of the ranks' partial
products. ``make_inputs`` draws this rank's shard from its own seed (the harness gives each rank
the run seed plus its rank). The baseline's untimed ``gather_full`` gathers the whole X and W
onto every rank, and ``full_linear`` computes Y = X W on one GPU, as a model too small to need
tensor parallelism would. The reference gathers the shards in float64 and multiplies. The
row-parallel kernel is in ``kernel.py``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def make_inputs(*, seed: int, device: str, dtype: str, M: int, K: int, N: int, world: int):
    """This rank's shards: x (M, K / world) and w (K / world, N), standard normal / sqrt(K)."""
    if dist.is_initialized() and dist.get_world_size() != world:
        raise ValueError(f"params.world is {world} but the process group has {dist.get_world_size()} ranks")
    if K % world:
        raise ValueError(f"K = {K} must split evenly over {world} ranks")
    g = torch.Generator(device=device).manual_seed(seed)
    dt = getattr(torch, dtype)
    x = torch.randn((M, K // world), generator=g, device=device, dtype=torch.float32)
    w = torch.randn((K // world, N), generator=g, device=device, dtype=torch.float32) / K ** 0.5
    return x.to(dt), w.to(dt)


def _gather(t: torch.Tensor, dim: int) -> torch.Tensor:
    parts = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, t.contiguous())
    return torch.cat(parts, dim=dim)


def gather_full(x: torch.Tensor, w: torch.Tensor):
    """Baseline prepare (untimed): the whole X (M, K) and W (K, N) on this rank."""
    return _gather(x, 1), _gather(w, 0)


def full_linear(x_full: torch.Tensor, w_full: torch.Tensor) -> torch.Tensor:
    """Baseline: the whole layer on one GPU, Y = X W (cuBLAS)."""
    return torch.matmul(x_full, w_full)


def reference_fp64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Y = X W in float64 from every rank's shards."""
    xf, wf = _gather(x.to(torch.float64), 1), _gather(w.to(torch.float64), 0)
    return xf @ wf
