"""kernels/streamk/: the portable two-launch fix-up in the interpreter; the spin-wait on a GPU."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import assert_seeds_differ

from kernels.matmul import task as MT
from kernels.streamk import kernel as SK

CLAIM = "streamk-vs-data-parallel"


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIM)


@pytest.mark.parametrize("programs", [1, 2, 3, 4, 7, 11, 500])
def test_every_split_of_the_k_steps(programs):
    """40x70x200 at the interpreter's 32x32x32 tiles: 6 tiles x 7 k-steps = 42 steps. 1 program
    runs everything in one loop; 2 to 11 split tiles between neighbours, 11 with several
    contributors per tile; 500 is clamped to 42 programs of one k-step each."""
    a, b = MT.make_inputs(seed=6, device="cpu", dtype="float32", M=40, N=70, K=200)
    ref = MT.reference_fp64(a, b)
    out = SK.streamk_matmul(a, b, num_programs=programs).double()
    assert float((out - ref).norm() / ref.norm()) < 1e-6
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.gpu
def test_spin_wait_equals_the_portable_fix_up_on_gpu():
    """One launch with flags against two launches: same split, same order, so bitwise equal."""
    a, b = MT.make_inputs(seed=8, device="cuda", dtype="bfloat16", M=896, N=2432, K=1024)
    spin = SK.streamk_matmul(a, b, spin=True)
    portable = SK.streamk_matmul(a, b, spin=False)
    torch.cuda.synchronize()
    assert torch.equal(spin, portable)
    ref = MT.reference_fp64(a, b)
    assert float((spin.double() - ref).norm() / ref.norm()) < 5e-3
