"""Transpose task: a 4-byte matrix, its transpose in float64, and the naive copy-transpose as
the baseline.

Both the naive and the tiled kernel are CUDA C in ``transpose.cu``, launched through CuPy with the
blog's geometry: one 32x32 tile per block, 32x8 threads, four elements per thread. The launch
helpers and the naive kernel's CPU emulation live here; the tiled kernel, its emulation and the
narrative are in ``kernel.py``. On CPU tensors both sides run torch emulations of their kernels.
"""

from __future__ import annotations

from pathlib import Path

import torch

TILE = 32
BLOCK_ROWS = 8
_CU = Path(__file__).with_name("transpose.cu")
_FUNCTIONS: dict = {}  # (device index, kernel name) -> cupy.RawKernel, filled on first CUDA call


def cuda_function(name: str, device_index: int):
    import cupy

    key = (device_index, name)
    if key not in _FUNCTIONS:
        with cupy.cuda.Device(device_index):
            module = cupy.RawModule(code=_CU.read_text(), options=("-std=c++17",))
            _FUNCTIONS[key] = module.get_function(name)
    return _FUNCTIONS[key]


def check_shape(x: torch.Tensor) -> tuple[int, int]:
    if x.dim() != 2 or not x.is_contiguous() or x.element_size() != 4:
        raise ValueError("expects a contiguous 2-D tensor of a 4-byte dtype")
    rows, cols = x.shape
    if (rows + TILE - 1) // TILE > 65535:
        raise ValueError("rows exceed the grid's y limit (65535 tiles)")
    return rows, cols


def launch(name: str, x: torch.Tensor) -> torch.Tensor:
    import cupy
    import numpy as np

    rows, cols = check_shape(x)
    out = torch.empty((cols, rows), dtype=x.dtype, device=x.device)
    grid = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE, 1)
    with cupy.cuda.Device(x.device.index):
        fn = cuda_function(name, x.device.index)
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream)
        with stream:
            fn(grid, (TILE, BLOCK_ROWS, 1),
               (cupy.asarray(x), cupy.asarray(out), np.int32(rows), np.int32(cols)))
    return out


def blocks_and_threads(rows: int, cols: int):
    """Index tensors of shape (blocks, 8, 32): blockIdx.x, blockIdx.y, threadIdx.y, threadIdx.x."""
    gx, gy = (cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE
    blk = torch.arange(gx * gy).view(-1, 1, 1)
    bx, by = blk % gx, blk // gx
    ty = torch.arange(BLOCK_ROWS).view(1, -1, 1)
    tx = torch.arange(TILE).view(1, 1, -1)
    return blk, bx, by, ty, tx


def poisoned(shape, like: torch.Tensor) -> torch.Tensor:
    """An output buffer whose unwritten elements stand out (NaN or the most negative int)."""
    fill = float("nan") if like.is_floating_point() else torch.iinfo(like.dtype).min
    return torch.full(shape, fill, dtype=like.dtype)


def _emulate_naive(x: torch.Tensor) -> torch.Tensor:
    rows, cols = check_shape(x)
    src = x.reshape(-1)
    out = poisoned((cols * rows,), x)
    _, bx, by, ty, tx = blocks_and_threads(rows, cols)
    col, row = bx * TILE + tx, by * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        m = (col < cols) & (row + j < rows)
        out[(col * rows + row + j).expand_as(m)[m]] = src[((row + j) * cols + col).expand_as(m)[m]]
    return out.view(cols, rows)


def transpose_naive(x: torch.Tensor) -> torch.Tensor:
    """The baseline: same geometry, writes straight down the output's columns (uncoalesced)."""
    if x.is_cuda:
        return launch("transpose_naive_32x8", x)
    return _emulate_naive(x)


def make_inputs(*, seed: int, device: str, dtype: str, rows: int, cols: int):
    g = torch.Generator(device=device).manual_seed(seed)
    if dtype == "float32":
        x = torch.randn((rows, cols), generator=g, device=device, dtype=torch.float32)
    elif dtype == "int32":
        x = torch.randint(-(2**31), 2**31 - 1, (rows, cols), generator=g, device=device,
                          dtype=torch.int32)
    else:
        raise ValueError(f"transpose moves 4-byte words; dtype {dtype!r} is not one")
    return (x,)


def reference_fp64(x: torch.Tensor) -> torch.Tensor:
    return x.to(torch.float64).t().contiguous()
