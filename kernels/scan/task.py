"""Scan task: int32 values in [-1000, 1000], their inclusive prefix sum in float64 (exact: a
random walk of 2^28 such steps stays near 1e7, far inside int32 and float64's integers), and
torch.cumsum kept in int32 as the baseline (CUB's inclusive scan for 1-D CUDA tensors, itself a
decoupled look-back). The kernel is in ``kernel.py`` and ``scan.cu``.
"""

from __future__ import annotations

import torch


def torch_cumsum(x: torch.Tensor) -> torch.Tensor:
    """The baseline: torch.cumsum, kept in int32 (CUB's inclusive scan for 1-D CUDA tensors)."""
    return torch.cumsum(x, dim=0, dtype=torch.int32)


def make_inputs(*, seed: int, device: str, dtype: str, n: int):
    if dtype != "int32":
        raise ValueError(f"the scan is int32 only, not {dtype!r}")
    g = torch.Generator(device=device).manual_seed(seed)
    # Values in [-1000, 1000]: prefix sums stay far inside int32 (a random walk of 2^28 steps
    # reaches ~1e7), so the float64 reference is exact and no result depends on wrap-around.
    return (torch.randint(-1000, 1001, (n,), generator=g, device=device, dtype=torch.int32),)


def reference_fp64(x: torch.Tensor) -> torch.Tensor:
    return torch.cumsum(x.to(torch.float64), dim=0)
