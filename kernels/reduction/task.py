"""Reduction task: a float32 vector of uniform [0, 1) values, its float64 sum, and torch.sum as
the baseline (ATen's vectorised reduce kernel). Every term is positive, so the sum is well
conditioned and a float32 result can be held to float32's relative tolerance. The one-launch
CUDA C reduction is in ``kernel.py`` and ``reduction.cu``.
"""

from __future__ import annotations

import torch


def torch_sum(x: torch.Tensor) -> torch.Tensor:
    """The baseline: torch.sum (ATen's vectorised reduce kernel)."""
    return torch.sum(x)


def make_inputs(*, seed: int, device: str, dtype: str, n: int):
    if dtype != "float32":
        raise ValueError(f"the reduction is float32 only, not {dtype!r}")
    g = torch.Generator(device=device).manual_seed(seed)
    # Uniform [0, 1): every term positive, so the sum is well conditioned and a float32
    # result can be held to float32's relative tolerance.
    return (torch.rand(n, generator=g, device=device, dtype=torch.float32),)


def reference_fp64(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64).sum()
