"""kernels/matmul/persistent.py in the Triton interpreter, at the claim's check shapes."""

from __future__ import annotations

import torch
from kernel_claims import assert_seeds_differ, load_claim

from kernels.matmul import persistent as P
from kernels.matmul import task as MT
from kernels.matmul.tiles import CONFIG_INTERPRETER, CONFIG_LARGE, gemm_config

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


def test_a_check_shape_makes_gpu_programs_take_several_tiles():
    """On an H100 or H200 (132 SMs) a program loops only when there are more than 132 tiles of
    the GPU's 128x256; one check shape must have that many, with a ragged last row and column."""
    bm, bn = CONFIG_LARGE["BLOCK_M"], CONFIG_LARGE["BLOCK_N"]
    looping = [p for p in load_claim(CLAIM)["workload"]["check_params"]
               if -(-p["M"] // bm) * -(-p["N"] // bn) > 132 and p["M"] % bm and p["N"] % bn]
    assert looping, "no check shape gives the GPU more tiles than SMs"


def test_the_interpreter_takes_the_gpu_tiles_only_for_a_shape_that_large():
    """Small check shapes keep the interpreter's 32x32 tiles; the many-tile one gets the GPU's."""
    a = torch.empty(1, 1)
    assert gemm_config(a, 300, 600) == CONFIG_INTERPRETER
    assert gemm_config(a, 1500, 2900) == CONFIG_LARGE
