"""kernels/transpose/: the CPU emulation of both CUDA kernels, and (on a GPU) the kernels."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from kernels.transpose import kernel as T
from kernels.transpose import task as TT

CLAIM = yaml.safe_load((Path(__file__).resolve().parents[2] / "claims" / "transpose-tiled-padded-cupy.yaml").read_text())
CHECK_SHAPES = [(p["rows"], p["cols"]) for p in CLAIM["workload"]["check_params"]]
EDGE_SHAPES = [(32, 32), (31, 33), (64, 65), (65, 64), (8, 96), (2, 3)]


def _inputs(rows, cols, seed=0, dtype="float32", device="cpu"):
    return TT.make_inputs(seed=seed, device=device, dtype=dtype, rows=rows, cols=cols)


@pytest.mark.parametrize("fn", [T.transpose_tiled, TT.transpose_naive], ids=["tiled", "naive"])
@pytest.mark.parametrize("rows,cols", CHECK_SHAPES + EDGE_SHAPES)
def test_emulation_matches_reference_exactly(fn, rows, cols):
    (x,) = _inputs(rows, cols)
    out = fn(x)
    assert out.shape == (cols, rows) and out.dtype == x.dtype
    assert torch.equal(out.to(torch.float64), TT.reference_fp64(x))


def test_int32_words_move_bit_exactly():
    (x,) = _inputs(45, 70, dtype="int32")
    assert torch.equal(T.transpose_tiled(x), x.t().contiguous())
    assert torch.equal(TT.transpose_naive(x), x.t().contiguous())


def test_every_output_element_is_written():
    """The emulation starts from a NaN-filled output, so a hole in the tiling shows up."""
    (x,) = _inputs(37, 71)
    assert not torch.isnan(T.transpose_tiled(x)).any()


def test_seeds_give_different_inputs():
    (a,), (b,) = _inputs(33, 31, seed=1), _inputs(33, 31, seed=2)
    assert not torch.equal(a, b)
    assert torch.equal(a, _inputs(33, 31, seed=1)[0])


@pytest.mark.parametrize("bad", [torch.zeros(4, 6)[:, ::2], torch.zeros(4, 4, dtype=torch.float64),
                                 torch.zeros(8)], ids=["strided", "8-byte", "1-d"])
def test_rejects_what_the_kernel_cannot_move(bad):
    with pytest.raises(ValueError):
        T.transpose_tiled(bad)


def test_make_inputs_refuses_other_dtypes():
    with pytest.raises(ValueError):
        _inputs(2, 2, dtype="bfloat16")


@pytest.mark.gpu
@pytest.mark.parametrize("fn", [T.transpose_tiled, TT.transpose_naive], ids=["tiled", "naive"])
@pytest.mark.parametrize("rows,cols", CHECK_SHAPES + EDGE_SHAPES + [(1000, 2049)])
def test_cuda_kernel_matches_reference(fn, rows, cols):
    pytest.importorskip("cupy")
    (x,) = _inputs(rows, cols, device="cuda")
    out = fn(x)
    torch.cuda.synchronize()
    assert out.is_cuda and out.shape == (cols, rows)
    assert torch.equal(out.to(torch.float64), TT.reference_fp64(x))
