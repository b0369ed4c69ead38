"""Matrix transpose tiled through padded shared memory, against a naive copy-transpose.

Entry: *Efficient Matrix Transpose in CUDA C/C++* (M. Harris, NVIDIA developer blog). Both
kernels are CUDA C in ``transpose.cu``, launched through CuPy with the blog's geometry: one
32x32 tile per block, 32x8 threads, four elements per thread. Effective bandwidth, as the blog
counts it, is ``2 * rows * cols * 4`` bytes over the time.

Mechanism. The naive kernel reads a row of the tile (coalesced) and writes it as a column of the
output: one warp store of 32 words touches 32 rows, i.e. 32 different 32-byte sectors carrying
4 useful bytes each. The tiled kernel loads the tile with row-wise reads into shared memory and
writes it out with row-wise stores, reading the tile down a column; the tile is 32x33 words so that
a column read touches 32 different banks (address ``33*i + j`` sits in bank ``(i + j) % 32``).

Derivation of the claimed speedup (implementer report, H100/H200). Both kernels move the same
DRAM bytes: every block fills complete 128-byte lines of each output row it touches within its
lifetime, so the write-back L2 merges the naive kernel's partial sectors before they reach
HBM. The difference is the number of sector requests the SMs send to L2: per 32 elements the naive
kernel sends 4 (load) + 32 (store) = 36, the tiled kernel 4 + 4 = 8, i.e. 4.5x. The tiled kernel
should therefore run near copy speed and the naive one take 4.5 / r times as long, where r is how
much faster (in bytes of sector requests) the L2 accepts 32-byte partial stores than HBM streams a
copy, as long as r < 4.5. We have not measured r; the claimed 1.5 is what remains if r were 3
(about 13 TB/s of sector requests on an H200 whose copy runs at 4.3 TB/s). So 1.5 is a floor
under the mechanism, not a forecast; third-party reports of 2-5x on recent GPUs are not used.
At 16384 x 16384 float32 the working set is 2 GiB, about 40x the L2.

Correctness. Only a GPU run checks the CUDA code. On CPU tensors ``transpose_tiled`` and
``transpose_naive`` run a torch emulation of the same kernels: the same grid, thread indices,
``j`` loop, bounds checks and 32x33 tile, vectorised over blocks and threads. It checks the
indexing and the edge handling, not the CUDA source itself (the tests compile that with nvcc and
check its register and spill report).
"""

from __future__ import annotations

from pathlib import Path

import torch

TILE = 32
BLOCK_ROWS = 8
_CU = Path(__file__).with_name("transpose.cu")
_FUNCTIONS: dict = {}  # (device index, kernel name) -> cupy.RawKernel, filled on first CUDA call


def _cuda_function(name: str, device_index: int):
    import cupy

    key = (device_index, name)
    if key not in _FUNCTIONS:
        with cupy.cuda.Device(device_index):
            module = cupy.RawModule(code=_CU.read_text(), options=("-std=c++17",))
            _FUNCTIONS[key] = module.get_function(name)
    return _FUNCTIONS[key]


def _check(x: torch.Tensor) -> tuple[int, int]:
    if x.dim() != 2 or not x.is_contiguous() or x.element_size() != 4:
        raise ValueError("expects a contiguous 2-D tensor of a 4-byte dtype")
    rows, cols = x.shape
    if (rows + TILE - 1) // TILE > 65535:
        raise ValueError("rows exceed the grid's y limit (65535 tiles)")
    return rows, cols


def _launch(name: str, x: torch.Tensor) -> torch.Tensor:
    import cupy
    import numpy as np

    rows, cols = _check(x)
    out = torch.empty((cols, rows), dtype=x.dtype, device=x.device)
    grid = ((cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE, 1)
    with cupy.cuda.Device(x.device.index):
        fn = _cuda_function(name, x.device.index)
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream(x.device).cuda_stream)
        with stream:
            fn(grid, (TILE, BLOCK_ROWS, 1),
               (cupy.asarray(x), cupy.asarray(out), np.int32(rows), np.int32(cols)))
    return out


def _blocks_and_threads(rows: int, cols: int):
    """Index tensors of shape (blocks, 8, 32): blockIdx.x, blockIdx.y, threadIdx.y, threadIdx.x."""
    gx, gy = (cols + TILE - 1) // TILE, (rows + TILE - 1) // TILE
    blk = torch.arange(gx * gy).view(-1, 1, 1)
    bx, by = blk % gx, blk // gx
    ty = torch.arange(BLOCK_ROWS).view(1, -1, 1)
    tx = torch.arange(TILE).view(1, 1, -1)
    return blk, bx, by, ty, tx


def _poisoned(shape, like: torch.Tensor) -> torch.Tensor:
    """An output buffer whose unwritten elements stand out (NaN or the most negative int)."""
    fill = float("nan") if like.is_floating_point() else torch.iinfo(like.dtype).min
    return torch.full(shape, fill, dtype=like.dtype)


def _emulate_tiled(x: torch.Tensor) -> torch.Tensor:
    rows, cols = _check(x)
    src = x.reshape(-1)
    out = _poisoned((cols * rows,), x)
    blk, bx, by, ty, tx = _blocks_and_threads(rows, cols)
    tile = torch.zeros((blk.shape[0], TILE, TILE + 1), dtype=x.dtype)
    col, row = bx * TILE + tx, by * TILE + ty          # load phase
    for j in range(0, TILE, BLOCK_ROWS):
        m = (col < cols) & (row + j < rows)
        b, r, c = torch.broadcast_tensors(blk, ty + j, tx)
        tile[b[m], r[m], c[m]] = src[((row + j) * cols + col).expand_as(m)[m]]
    col, row = by * TILE + tx, bx * TILE + ty          # store phase
    for j in range(0, TILE, BLOCK_ROWS):
        m = (col < rows) & (row + j < cols)
        b, r, c = torch.broadcast_tensors(blk, tx, ty + j)   # tile[threadIdx.x][threadIdx.y + j]
        out[((row + j) * rows + col).expand_as(m)[m]] = tile[b[m], r[m], c[m]]
    return out.view(cols, rows)


def _emulate_naive(x: torch.Tensor) -> torch.Tensor:
    rows, cols = _check(x)
    src = x.reshape(-1)
    out = _poisoned((cols * rows,), x)
    _, bx, by, ty, tx = _blocks_and_threads(rows, cols)
    col, row = bx * TILE + tx, by * TILE + ty
    for j in range(0, TILE, BLOCK_ROWS):
        m = (col < cols) & (row + j < rows)
        out[(col * rows + row + j).expand_as(m)[m]] = src[((row + j) * cols + col).expand_as(m)[m]]
    return out.view(cols, rows)


def transpose_tiled(x: torch.Tensor) -> torch.Tensor:
    """The kernel: 32x33 shared-memory tile, CUDA C via CuPy; CPU tensors run the emulation."""
    if x.is_cuda:
        return _launch("transpose_tiled_32x33", x)
    return _emulate_tiled(x)


def transpose_naive(x: torch.Tensor) -> torch.Tensor:
    """The baseline: same geometry, writes straight down the output's columns (uncoalesced)."""
    if x.is_cuda:
        return _launch("transpose_naive_32x8", x)
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
