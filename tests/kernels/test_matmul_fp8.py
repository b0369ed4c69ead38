"""kernels/fp8_matmul/: the E4M3 grid emulated in float32 (the claim's CPU check), and the true
fp8 path (E4M3 tensors in, bf16 out) in the Triton interpreter."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import assert_matches, assert_seeds_differ, load_claim

from kernels.fp8_matmul import cublas as C
from kernels.fp8_matmul import kernel as F
from kernels.fp8_matmul import task as FT

CLAIM = "matmul-fp8-triton-vs-scaled-mm"


def test_scaled_mm_computes_the_same_function_in_bf16():
    """The cuBLAS side on true E4M3 tensors (PyTorch's CPU kernel here): bf16 out, within the
    claim's bounds of the float64 product of the dequantized operands."""
    a, b = FT.make_inputs(seed=5, device="cpu", dtype="float8_e4m3fn", M=37, N=70, K=53)
    out = C.scaled_mm(*C.quantize_for_scaled_mm(a, b))
    assert out.dtype == torch.bfloat16 and out.shape == (37, 70)
    assert_matches(out, FT.reference_fp64(a, b), load_claim(CLAIM)["correctness"], "scaled_mm bf16")


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIM)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_scale_is_the_smallest_power_of_two_that_fits(dtype):
    x = FT.make_inputs(seed=11, device="cpu", dtype=dtype, M=33, N=5, K=40)[0] * 1000
    q, s = FT.quantize(x)
    mant, _ = torch.frexp(s)
    assert float(mant) == 0.5, "scale is a power of two"
    amax = float(x.abs().max())
    assert amax / float(s) <= FT.E4M3_MAX < 2 * amax / float(s)
    assert q.dtype == FT.FP8 and torch.isfinite(q.float()).all()


def test_dequantized_baseline_operands_are_exact():
    """E4M3 value x power of two fits bf16 exactly, so the baseline computes the same function."""
    a, b = FT.make_inputs(seed=12, device="cpu", dtype="float8_e4m3fn", M=31, N=17, K=45)
    assert a.dtype == torch.bfloat16
    da, db = FT.dequantized_operands(a, b)
    (qa, sa), (qb, sb) = FT.quantize(a), FT.quantize(b)
    assert torch.equal(da.double(), qa.double() * sa.double())
    assert torch.equal(db.double(), qb.double() * sb.double())


def test_true_fp8_path_in_the_interpreter():
    """Real float8_e4m3fn operands and a bf16 output, held to the claim's GPU tolerances."""
    corr = load_claim(CLAIM)["correctness"]
    for M, N, K in [(37, 70, 53), (1, 1, 1), (33, 17, 130)]:
        a, b = FT.make_inputs(seed=13, device="cpu", dtype="float8_e4m3fn", M=M, N=N, K=K)
        qa, qbt, sa, sb = F.quantize_operands(a, b)
        assert qa.dtype == FT.FP8 and qbt.shape == (N, K) and qbt.is_contiguous()
        out = F.fp8_matmul(qa, qbt, sa, sb)
        assert out.dtype == torch.bfloat16
        ref = FT.reference_fp64(a, b)
        assert_matches(out, ref, corr, f"fp8 {M}x{N}x{K}")
        assert_matches(FT.torch_matmul(*FT.dequantized_operands(a, b)), ref, corr, f"baseline {M}x{N}x{K}")


def test_reference_is_not_the_unquantized_product():
    """Quantization error (percents) is excluded from the bounds only because the reference
    dequantizes too; the unquantized product must fail them."""
    corr = load_claim(CLAIM)["correctness"]
    a, b = FT.make_inputs(seed=14, device="cpu", dtype="float32", M=40, N=40, K=64)
    raw = a.double() @ b.double()
    with pytest.raises(AssertionError):
        assert_matches(raw, FT.reference_fp64(a, b), corr, "unquantized")
