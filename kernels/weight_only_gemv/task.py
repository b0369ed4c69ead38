"""Weight-only quantization task: a decode activation and a weight matrix, per-row int4
quantization, the float64 reference, and a 16-bit GEMV as the baseline.

``quantize_rows`` gives integer codes q in [-8, 7] and one float32 scale per output row; the
reference is x (q * s)^T in float64 (quantization error is not the claim). The baseline's untimed
``dequantize_bf16`` stores the same dequantized weights in the input dtype, and ``dense_gemv``
runs torch's GEMV (cuBLAS) on them. The 4-bit kernel and its packing are in ``kernel.py``.
"""

from __future__ import annotations

import torch


def quantize_rows(w: torch.Tensor):
    """Per-row symmetric int4: integer codes in [-8, 7] and float32 scales (deterministic)."""
    w32 = w.to(torch.float32)
    amax = w32.abs().amax(dim=1)
    scale = torch.where(amax > 0, amax / 7.0, torch.ones_like(amax))
    q = torch.clamp(torch.round(w32 / scale[:, None]), -8, 7)
    return q, scale


def make_inputs(*, seed: int, device: str, dtype: str, rows: int, cols: int):
    """Activation x (1, cols) and weight W (rows, cols), standard normal: bf16 when the claim's dtype
    is int4 (the 4-bit codes are the kernel's `prepare`; torch has no int4 tensor to make), else
    that dtype (float32 on a CPU check)."""
    gen = torch.Generator().manual_seed(seed)
    dt = torch.bfloat16 if dtype == "int4" else getattr(torch, dtype)
    x = torch.randn(1, cols, generator=gen)
    w = torch.randn(rows, cols, generator=gen)
    return x.to(device=device, dtype=dt), w.to(device=device, dtype=dt)


def reference_fp64(x, w):
    """x (q * s)^T in float64, from the dequantized weights, on the inputs' device (issue 23: no
    host copy of the 16384^2 matrix in float64)."""
    q, scale = quantize_rows(w)
    w64 = q.to(torch.float64) * scale.to(torch.float64)[:, None]
    return x.detach().to(torch.float64) @ w64.T


def dequantize_bf16(x, w):
    """Baseline prepare (untimed): the same dequantized weights, stored in the input dtype."""
    q, scale = quantize_rows(w)
    return x.contiguous(), (q * scale[:, None]).to(w.dtype).contiguous()


def dense_gemv(x, w_deq):
    """Baseline: torch's GEMV (cuBLAS) on 16-bit weights."""
    return torch.nn.functional.linear(x, w_deq)
