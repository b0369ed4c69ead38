"""Batch-invariant RMSNorm on the GPU, and what invariance costs against torch's rms_norm.

Entry: *Defeating Nondeterminism in LLM Inference* (He and Thinking Machines Lab, 2025). A row's
result is batch-invariant when the order in which its reduction adds numbers does not depend on
how many rows share the launch. An RMSNorm loses that when it splits a row's sum of squares over
several programs for small batches. This kernel fixes the strategy: one program per row, the sum
of squares accumulated in a BLOCK-wide fp32 vector over the row's BLOCK-wide chunks and reduced
once, BLOCK and warps chosen from the hidden size alone (never the row count). The property
``batch-invariant`` checks it bit for bit. The mechanism in full, and the matmul, are in
``matmul.py``; the inputs, reference and baseline in ``task.py``.

The cost, and the claimed value (implementer report). 16384 x 8192 bf16 (a long prefill): x is
read once from HBM, the 16 KB row re-read from L1/L2 for the second pass, y written once: 537 MB
at the 4.3 TB/s copy rate measured on one H200, 125 us. torch's rms_norm on CUDA
(``_fused_rms_norm_cuda``, the layer-norm kernels with an RMS flag) also reduces each row within
one block and moves the same bytes, so at this batch size invariance forbids nothing it does:
expected ratio 1.0; **claimed 1.0**, tolerance 0.1 (a Triton row kernel against hand-vectorized
CUDA). Should torch take its two-kernel path (statistics, then normalize) it reads x twice and
the ratio is higher; the claim is a floor. Hidden sizes above 8192 run the chunk loop more than
once; a check shape (hidden 8195) covers that, in the interpreter at the GPU's 8192-wide chunks
too (tests/kernels/test_gpu_tiles.py). Only the GPU measures the cost.
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
