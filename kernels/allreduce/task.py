"""All-reduce task: each rank's vector, the float64 sum over ranks as the reference (gathered
in float64 and summed locally), and reduce-to-rank-0-then-broadcast as the baseline. The NCCL
all-reduce kernel and the narrative are in ``kernel.py``.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def make_inputs(*, seed: int, device: str, dtype: str, numel: int, world: int):
    """This rank's vector; the harness gives each rank its own seed (run seed + rank)."""
    if dist.is_initialized() and dist.get_world_size() != world:
        raise ValueError(f"params.world is {world} but the process group has {dist.get_world_size()} ranks")
    gen = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn(numel, generator=gen, device=device, dtype=torch.float32)
    return (x.to(getattr(torch, dtype)),)


def reduce_then_broadcast(x):
    out = x.clone()
    dist.reduce(out, dst=0, op=dist.ReduceOp.SUM)
    dist.broadcast(out, src=0)
    return out


def reference_fp64(x):
    x = x.to(torch.float64)
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    return torch.stack(parts).sum(dim=0)
