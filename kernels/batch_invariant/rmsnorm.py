"""Batch-invariant RMSNorm on the GPU, and what invariance costs against torch's rms_norm.

See ``matmul.py`` for the mechanism in full and the derivation of both costs; the inputs, the
reference and the baseline are in ``task.py``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.batch_invariant.task import EPS
from kernels.launch import gpu_tiles

RMSNORM_MAX_BLOCK, RMSNORM_WARPS = 8192, 16


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, y_ptr, hidden, stride_x, stride_y, eps, BLOCK: tl.constexpr):
    """One program per row; the sum of squares is a BLOCK-wide fp32 vector, reduced once."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for start in range(0, hidden, BLOCK):
        x = tl.load(x_ptr + row * stride_x + start + offs, mask=start + offs < hidden, other=0.0)
        x = x.to(tl.float32)
        acc += x * x
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / hidden + eps)
    for start in range(0, hidden, BLOCK):
        mask = start + offs < hidden
        x = tl.load(x_ptr + row * stride_x + start + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + start + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * stride_y + start + offs, (x * rstd * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm_batch_invariant(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """The kernel. BLOCK and warps depend on the hidden size only, never on the row count."""
    if x.dim() != 2 or x.stride(1) != 1 or w.shape != (x.shape[1],):
        raise ValueError("expects x (rows, hidden) with contiguous rows and w (hidden,)")
    rows, hidden = x.shape
    y = torch.empty_like(x)
    if not gpu_tiles(x):
        cfg = dict(BLOCK=32, num_warps=1)
    else:
        cfg = dict(BLOCK=min(RMSNORM_MAX_BLOCK, triton.next_power_of_2(hidden)), num_warps=RMSNORM_WARPS)
    _rmsnorm_kernel[(rows,)](x, w.contiguous(), y, hidden, x.stride(0), y.stride(0), EPS, **cfg)
    return y
