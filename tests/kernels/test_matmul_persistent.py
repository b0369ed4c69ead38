"""kernels/matmul/persistent.py in the Triton interpreter, at the claim's check shapes."""

from __future__ import annotations

import torch
from kernel_claims import assert_seeds_differ

from kernels.matmul import persistent as P
from kernels.matmul import task as MT

CLAIM = "matmul-persistent-vs-grouped"


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIM)


def test_programs_loop_over_uneven_tile_counts():
    """7 tiles over 3 programs (3, 2, 2 tiles each) and 1 tile over 1 program."""
    assert P.CPU_PROGRAMS == 3
    for M, N in [(16 * 7, 9), (5, 3)]:
        a, b = MT.make_inputs(seed=5, device="cpu", dtype="float32", M=M, N=N, K=40)
        out = P.persistent_matmul(a, b).double()
        assert torch.allclose(out, MT.reference_fp64(a, b), rtol=1e-5, atol=1e-5)
