"""CPU softmax task: logits, the float64 reference, and eager softmax with full-size intermediates.

The baseline writes every intermediate of exp(x - max) / sum to memory, one sweep per operation,
the version the Triton fused-softmax tutorial counts. The fused kernel is in ``kernel.py``.
"""

from __future__ import annotations

import torch


def naive_softmax(x: torch.Tensor) -> torch.Tensor:
    """Baseline: eager safe softmax, one full-size intermediate per step."""
    m = x.amax(dim=1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=1, keepdim=True)


def make_inputs(*, seed: int, device: str, dtype: str, rows: int, cols: int):
    """Logits (rows, cols), normal with standard deviation 3."""
    gen = torch.Generator().manual_seed(seed)
    return (3.0 * torch.randn(rows, cols, generator=gen)).to(device=device, dtype=getattr(torch, dtype)),


def reference_fp64(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension in float64, written out without torch.softmax."""
    x = x.detach().to("cpu", torch.float64)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
