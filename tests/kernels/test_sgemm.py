"""kernels/sgemm/: the fp32 FMA GEMM under the interpreter at the claim's shapes, and fp32 exactness."""

from __future__ import annotations

import pytest
from kernel_claims import assert_seeds_differ

from kernels.matmul import task as MT
from kernels.sgemm import kernel as SG

CLAIM = "sgemm-blocktiled-vs-cublas"


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIM)


def test_fp32_accuracy_is_fp32_not_tf32():
    """TF32 keeps 10 mantissa bits (relative error near 1e-3 at K = 512); the FMA path keeps fp32's."""
    a, b = MT.make_inputs(seed=3, device="cpu", dtype="float32", M=70, N=90, K=512)
    out, ref = SG.sgemm(a, b).double(), MT.reference_fp64(a, b)
    assert float((out - ref).norm() / ref.norm()) < 1e-6


def test_refuses_non_fp32():
    a, b = MT.make_inputs(seed=3, device="cpu", dtype="float16", M=4, N=4, K=4)
    with pytest.raises(ValueError):
        SG.sgemm(a, b)
