"""Softmax task: logits, the float64 reference, and the two baselines of the online-softmax claims.

Rows of logits (standard normal times 3 plus a per-row offset in [-20, 20], so the max shift
matters), softmax over the last dimension. Baselines: eager ``torch.softmax``, and a three-pass
safe softmax in Triton (max, then sum of exponentials, then write) with the same chunking, warps
and exp count as the online kernel in ``kernel.py``, so the two differ only in the extra read.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels.launch import gpu_tiles

CONFIG = dict(BLOCK=4096, num_warps=8)  # 16 elements per thread: 8 KB of bf16 in flight per program
CONFIG_INTERPRETER = dict(BLOCK=64, num_warps=1)


@triton.jit
def _three_pass_kernel(x_ptr, y_ptr, cols, stride_x, stride_y, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK)
    m = tl.full((), float("-inf"), tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < cols, other=float("-inf")).to(tl.float32)
        m = tl.maximum(m, tl.max(x, axis=0))
    d = tl.full((), 0.0, tl.float32)
    for start in range(0, cols, BLOCK):
        x = tl.load(x_row + start + offs, mask=start + offs < cols, other=float("-inf")).to(tl.float32)
        d += tl.sum(tl.exp(x - m), axis=0)
    inv = 1.0 / d
    for start in range(0, cols, BLOCK):
        mask = start + offs < cols
        x = tl.load(x_row + start + offs, mask=mask, other=float("-inf")).to(tl.float32)
        tl.store(y_row + start + offs, (tl.exp(x - m) * inv).to(y_ptr.dtype.element_ty), mask=mask)


def launch_rows(kernel, x: torch.Tensor) -> torch.Tensor:
    if x.dim() != 2 or x.stride(1) != 1:
        raise ValueError("expects a 2-D tensor with contiguous rows")
    rows, cols = x.shape
    y = torch.empty_like(x)
    cfg = CONFIG if gpu_tiles(x) else CONFIG_INTERPRETER
    kernel[(rows,)](x, y, cols, x.stride(0), y.stride(0), **cfg)
    return y


def three_pass_softmax(x: torch.Tensor) -> torch.Tensor:
    """Baseline: max pass, sum pass, write pass; same chunking and warps as the kernel."""
    return launch_rows(_three_pass_kernel, x)


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    """Baseline: eager torch.softmax over the last dimension."""
    return torch.softmax(x, dim=-1)


def make_inputs(*, seed: int, device: str, dtype: str, rows: int, cols: int):
    """Logits: standard normal times 3, plus a per-row offset in [-20, 20] (tests the max shift)."""
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32) * 3
    x += torch.rand((rows, 1), generator=g, device=device, dtype=torch.float32) * 40 - 20
    return (x.to(getattr(torch, dtype)),)


def reference_fp64(x: torch.Tensor) -> torch.Tensor:
    x = x.to(torch.float64)
    e = torch.exp(x - x.amax(dim=-1, keepdim=True))
    return e / e.sum(dim=-1, keepdim=True)
