"""GEMM task: random operands, the float64 product, and cuBLAS as the baseline.

C = A @ B with A (M, K) and B (K, N) standard normal in the claim's dtype. Every GEMM claim draws
its operands here (grouped, persistent, Stream-K, batch-invariant, roofline), so their inputs are
made where no kernel module has been imported. ``torch_matmul`` is the practitioner's baseline:
cuBLAS through torch.matmul, free to pick its own kernel, tiles and split-K.
"""

from __future__ import annotations

import torch


def draw(seed: int, device: str, dtype: torch.dtype, *shapes: tuple[int, ...]) -> tuple:
    """Standard-normal tensors from one generator seeded with ``seed``, drawn on ``device``."""
    g = torch.Generator(device=device).manual_seed(seed)
    return tuple(torch.randn(s, generator=g, device=device, dtype=torch.float32).to(dtype)
                 for s in shapes)


def make_inputs(*, seed: int, device: str, dtype: str, M: int, N: int, K: int):
    return draw(seed, device, getattr(torch, dtype), (M, K), (K, N))


def reference_fp64(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.to(torch.float64) @ b.to(torch.float64)


def torch_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """The baseline: torch.matmul, which dispatches to cuBLAS on CUDA."""
    return torch.matmul(a, b)
