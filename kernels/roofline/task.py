"""Copy task: a flat tensor, its float64 value as the reference, and torch's own copy
(``x.clone()``) as the baseline. The Triton copy is in ``kernel.py``; the roofline's other
ceiling, the GEMM, is claimed on the GEMM task and kernel (``kernels/matmul/``).
"""

from __future__ import annotations

import torch

from kernels.matmul.task import draw


def torch_copy(x: torch.Tensor) -> torch.Tensor:
    """Baseline: torch's own copy."""
    return x.clone()


def make_inputs(*, seed: int, device: str, dtype: str, n: int):
    return draw(seed, device, getattr(torch, dtype), (n,))


def reference_fp64(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64)
