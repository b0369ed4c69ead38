"""kernels/matmul/kernel.py in the Triton interpreter, at the claims' check shapes and tolerances."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import assert_seeds_differ

from kernels.matmul import kernel as G
from kernels.matmul import task as GT

CLAIMS = ["matmul-grouped-4096-vs-cublas", "matmul-grouped-skinny-vs-cublas"]


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIMS[0])


@pytest.mark.parametrize("M,N", [(80, 48), (16 * 7, 16), (16, 16 * 5)])
def test_grouped_order_writes_every_tile_once(M, N):
    """5 row tiles with GROUP_M 2 leave a last group of one row; a missed or doubled tile shows."""
    a, b = GT.make_inputs(seed=3, device="cpu", dtype="float32", M=M, N=N, K=20)
    out = G.grouped_matmul(a, b).double()
    assert torch.allclose(out, GT.reference_fp64(a, b), rtol=1e-5, atol=1e-5)


def test_strided_operands_and_float16():
    """A transposed view of A (row stride 1) and a float16 run that keeps its dtype."""
    at, b = GT.make_inputs(seed=4, device="cpu", dtype="float32", M=29, N=40, K=35)
    a = at.t().contiguous().t()  # the same (29, 35) values over a (35, 29) buffer
    assert a.stride() == (1, 29)
    out = G.grouped_matmul(a, b).double()
    assert torch.allclose(out, GT.reference_fp64(a, b), rtol=1e-5, atol=1e-5)
    h = G.grouped_matmul(a.half(), b.half())
    assert h.dtype == torch.float16
    ref = GT.reference_fp64(a.half(), b.half())
    assert float((h.double() - ref).norm() / ref.norm()) < 1e-3
