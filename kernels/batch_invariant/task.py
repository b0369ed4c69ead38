"""Batch-invariance task: RMSNorm inputs, references and torch's RMSNorm as the baseline.

Entry: *Defeating Nondeterminism in LLM Inference*. The RMSNorm claims (GPU and CPU) draw x
(rows, hidden) and a weight near 1 here, compare against RMSNorm in float64, and time torch's
``rms_norm``. The matmul claim draws its operands from the GEMM task (``kernels/matmul/task.py``)
and times cuBLAS. The kernels are ``rmsnorm.py`` and ``matmul.py`` (Triton, GPU) and
``cpu_rmsnorm.py`` (torch elementwise ops, CPU); each opens with what it demonstrates.
"""

from __future__ import annotations

import torch

from kernels.matmul.task import draw

EPS = 1e-6


def make_rmsnorm_inputs(*, seed: int, device: str, dtype: str, rows: int, hidden: int):
    x, w = draw(seed, device, torch.float32, (rows, hidden), (hidden,))
    return x.to(getattr(torch, dtype)), (1.0 + 0.1 * w).to(getattr(torch, dtype))


def rmsnorm_reference_fp64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """RMSNorm in float64."""
    x, w = x.detach().to(torch.float64), w.detach().to(torch.float64)
    return x * torch.rsqrt(x.square().mean(dim=-1, keepdim=True) + EPS) * w


def torch_rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Baseline: torch.nn.functional.rms_norm (a fused kernel on CUDA in recent PyTorch; a
    composite of pow, mean, add, rsqrt and two muls on CPU)."""
    return torch.nn.functional.rms_norm(x, (x.shape[-1],), w, EPS)
