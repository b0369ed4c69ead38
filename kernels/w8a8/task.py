"""W8A8 task: activations with outlier channels, a weight matrix, SmoothQuant's smoothing and
int8 quantization, the float64 reference, and bf16 cuBLAS as the baseline.

y = x W^T with x (M, K) activations and W (N, K) a linear layer's weight (PyTorch's layout). A
few of x's channels are 20x larger than the rest, as in the LLM activations SmoothQuant studies.
``smooth_quantize`` (the same for both sides, untimed):
- smoothing: s_j = sqrt(max|x_:,j| / max|W_:,j|) per input channel j; x' = x / s, W' = W * s,
  so x' W'^T = x W^T exactly in real arithmetic and the outliers move into the weights;
- quantization: one power-of-two scale per token (row of x') and per output channel (row of
  W'), the smallest that maps the row's amax inside [-127, 127]; q = round(v / scale).
Power-of-two scales make q * scale exact in bf16 (q needs 8 bits of significand), so the baseline
computes the very same function on the dequantized values, and the reference is the float64
product of those values: quantization error is not the claim, the GEMM's speed is. The int8
kernel is in ``kernel.py``.
"""

from __future__ import annotations

import torch

OUTLIER_EVERY = 97      # every 97th input channel is an outlier channel
OUTLIER_SCALE = 20.0


def make_inputs(*, seed: int, device: str, dtype: str, M: int, N: int, K: int):
    """x (M, K) with outlier channels and W (N, K), in the claim's dtype (bf16 for int8 claims)."""
    raw = torch.bfloat16 if dtype in ("int8", "uint8") else getattr(torch, dtype)
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((M, K), generator=g, device=device, dtype=torch.float32)
    x[:, ::OUTLIER_EVERY] *= OUTLIER_SCALE
    w = torch.randn((N, K), generator=g, device=device, dtype=torch.float32) * 0.05
    return x.to(raw), w.to(raw)


def _pow2_scale(amax: torch.Tensor) -> torch.Tensor:
    """Smallest power of two s with amax / s <= 127 (1 for an all-zero row)."""
    amax = amax.to(torch.float32).clamp_min(torch.finfo(torch.float32).tiny)
    mant, expo = torch.frexp(amax / 127.0)
    return torch.ldexp(torch.ones_like(amax), expo - (mant == 0.5).to(expo.dtype))


def smooth_quantize(x: torch.Tensor, w: torch.Tensor):
    """int8 q_x (M, K), int8 q_w (N, K), and their float32 power-of-two scales (M,), (N,)."""
    x32, w32 = x.to(torch.float32), w.to(torch.float32)
    s = torch.sqrt(x32.abs().amax(dim=0).clamp_min(1e-6) / w32.abs().amax(dim=0).clamp_min(1e-6))
    xs, ws = x32 / s, w32 * s
    sx, sw = _pow2_scale(xs.abs().amax(dim=1)), _pow2_scale(ws.abs().amax(dim=1))
    qx = torch.clamp(torch.round(xs / sx[:, None]), -127, 127).to(torch.int8)
    qw = torch.clamp(torch.round(ws / sw[:, None]), -127, 127).to(torch.int8)
    return qx, qw, sx, sw


def dequantize_bf16(x: torch.Tensor, w: torch.Tensor):
    """Baseline prepare (untimed): the same smoothed, quantized values, dequantized exactly in
    the input dtype."""
    qx, qw, sx, sw = smooth_quantize(x, w)
    return ((qx.to(torch.float32) * sx[:, None]).to(x.dtype).contiguous(),
            (qw.to(torch.float32) * sw[:, None]).to(w.dtype).contiguous())


def torch_linear(x_deq: torch.Tensor, w_deq: torch.Tensor) -> torch.Tensor:
    """Baseline: torch.nn.functional.linear, x W^T (cuBLAS bf16 GEMM on CUDA)."""
    return torch.nn.functional.linear(x_deq, w_deq)


def reference_fp64(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """(q_x * s_x) (q_w * s_w)^T in float64 on the inputs' device (an 8192^3 float64 product is
    minutes on a host CPU and milliseconds on a Hopper GPU's FP64 units)."""
    qx, qw, sx, sw = smooth_quantize(x, w)
    a = qx.to(torch.float64) * sx.to(torch.float64)[:, None]
    b = qw.to(torch.float64) * sw.to(torch.float64)[:, None]
    return a @ b.T
