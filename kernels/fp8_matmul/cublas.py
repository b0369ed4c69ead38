"""cuBLAS's FP8 GEMM through ``torch._scaled_mm``, with one scale per tensor.

List entry: *NVIDIA Transformer Engine* (claim ``matmul-fp8-vs-bf16-cublas``): what running a
linear layer's GEMM in FP8 buys on Hopper, the way Transformer Engine's simplest recipe does it
(one fp32 scale per tensor, E4M3 operands, cuBLASLt doing the multiply). This module is also the
practitioner's baseline of the Triton FP8 claim (``matmul-fp8-triton-vs-scaled-mm``).

Mechanism. Hopper's tensor cores multiply E4M3 operands at twice the bf16 rate (wgmma k = 32
instead of 16 per instruction), and an E4M3 operand is half the bytes. ``prepare`` (untimed, as
for stored fp8 weights) quantizes each operand with the task's power-of-two per-tensor scale and
lays B out column-major, the layout cuBLASLt's FP8 kernels take (A row-major, B "TN"). The
kernel multiplies, applies both scales and writes bf16. Fast accumulation is on: the tensor
cores keep their own accumulator, as Triton's FP8 dot does on sm_90, so both FP8 sides round
alike.

Derivation of the claimed speedup against cuBLAS bf16 on the same dequantized values (facts in
docs/sources.md). M = N = K = 8192: 1.1 TFLOP, compute-bound on both sides.
* Baseline: cuBLAS bf16, about 790 TFLOP/s on random data, measured on one H200.
* Kernel: cuBLAS FP8 ran at 1278 TFLOP/s on an H100 at 8192x8192x4096 (triton-lang/triton PR
  5461); K = 8192 only lengthens each tile's main loop, and the H200 is the same chip, so at least
  that. 1278 / 790 = 1.62.
* Cross-check from one source on one GPU at our shape: an H100 held to 500 W ran bf16 at 585 and
  an FP8 GEMM at 1126 TFLOP/s, 1.92x (pytorch/FBGEMM PR 2546); the tensor cores' 2x is the
  ceiling. We take the lower estimate. **Claimed 1.6**, tolerance 0.1.

cuBLASLt's FP8 GEMM wants every dimension a multiple of 16; the claim's main shape is, and the
ragged check shapes are zero-padded here (exact: padded rows and columns add zeros) and cropped.
On CPU ``torch._scaled_mm`` runs PyTorch's reference kernel on the same E4M3 values, in the check
dtype. Only the GPU runs cuBLAS and measures the speed.
"""

from __future__ import annotations

import torch

from kernels.fp8_matmul.task import quantize
from kernels.matmul.tiles import check_operands

ALIGN = 16  # cuBLASLt FP8: leading dimensions and sizes a multiple of 16


def _pad(t: torch.Tensor, rows: int, cols: int) -> torch.Tensor:
    if t.shape == (rows, cols):
        return t
    out = torch.zeros((rows, cols), dtype=t.dtype, device=t.device)
    out[: t.shape[0], : t.shape[1]] = t
    return out


def quantize_for_scaled_mm(a: torch.Tensor, b: torch.Tensor):
    """Prepare (untimed): E4M3 A (M, K) row-major, E4M3 B (K, N) column-major, both padded to
    multiples of 16 on CUDA, the two scales, and an empty tensor carrying the output dtype
    (bf16 for the GPU claim, the check dtype on CPU)."""
    M, N, K = check_operands(a, b)
    qa, sa = quantize(a)
    qb, sb = quantize(b)
    if a.is_cuda:
        up = lambda n: -(-n // ALIGN) * ALIGN  # noqa: E731
        qa = _pad(qa, up(M), up(K))
        qb = _pad(qb, up(K), up(N))
    qb_cm = qb.t().contiguous().t()
    out_dtype = torch.bfloat16 if a.dtype == torch.bfloat16 else a.dtype
    proto = torch.empty((M, N, 0), dtype=out_dtype, device=a.device)
    return qa.contiguous(), qb_cm, sa, sb, proto


def scaled_mm(qa: torch.Tensor, qb: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
              proto: torch.Tensor) -> torch.Tensor:
    """C = (qa @ qb) * scale_a * scale_b through torch._scaled_mm (cuBLASLt on CUDA), cropped to
    the unpadded (M, N) that ``proto`` carries."""
    M, N = proto.shape[0], proto.shape[1]
    c = torch._scaled_mm(qa, qb, scale_a=scale_a, scale_b=scale_b, out_dtype=proto.dtype,
                         use_fast_accum=True)
    if c.shape != (M, N):
        c = c[:M, :N].contiguous()
    return c
