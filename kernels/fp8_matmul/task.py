"""FP8 GEMM task: bf16 operands, their E4M3 quantization, the float64 reference and the baselines.

Each operand is scaled into E4M3's range by one power-of-two scale per tensor and rounded to
E4M3 (``quantize``). Power-of-two scales make dequantization exact, so every side computes the
same function: C = (qa * sa) @ (qb * sb). The reference is that product in float64. The
baselines get their operands from an untimed ``prepare``, as stored fp8 weights would be.
"""

from __future__ import annotations

import torch

from kernels.matmul.task import draw

FP8 = torch.float8_e4m3fn
E4M3_MAX = 448.0


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """E4M3 values of x / s and the power-of-two scale s (a 1-element float32 tensor, no sync)."""
    amax = x.abs().amax().to(torch.float32).reshape(1).clamp_min(torch.finfo(torch.float32).tiny)
    mant, expo = torch.frexp(amax / E4M3_MAX)               # amax/448 = mant * 2^expo, mant in [0.5, 1)
    scale = torch.ldexp(torch.ones_like(amax), expo - (mant == 0.5).to(expo.dtype))
    return (x.to(torch.float32) / scale).to(FP8), scale


def dequantized_operands(a: torch.Tensor, b: torch.Tensor):
    """Baseline prepare: the same E4M3 values times their scales, exact in the input dtype."""
    qa, sa = quantize(a)
    qb, sb = quantize(b)
    return (qa.to(torch.float32) * sa).to(a.dtype), (qb.to(torch.float32) * sb).to(b.dtype)


def torch_matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Baseline: torch.matmul on the dequantized bf16 operands (cuBLAS)."""
    return torch.matmul(a, b)


def make_inputs(*, seed: int, device: str, dtype: str, M: int, N: int, K: int):
    """Unquantized operands: bf16 when the claim's dtype is an fp8 format, else that dtype."""
    raw = torch.bfloat16 if dtype.startswith("float8") else getattr(torch, dtype)
    return draw(seed, device, raw, (M, K), (K, N))


def reference_fp64(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """float64 product of the dequantized operands (the function both sides compute)."""
    qa, sa = quantize(a)
    qb, sb = quantize(b)
    return (qa.to(torch.float64) * sa.double()) @ (qb.to(torch.float64) * sb.double())
