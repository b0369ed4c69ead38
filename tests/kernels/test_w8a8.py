"""kernels/w8a8/: SmoothQuant's smoothing and int8 quantization, and the int8 GEMM under the
interpreter at the claim's shapes."""

from __future__ import annotations

import torch
from kernel_claims import assert_seeds_differ

from kernels.w8a8 import kernel as K
from kernels.w8a8 import task as T

CLAIM = "w8a8-int8-gemm-vs-bf16-cublas"


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIM)


def test_smoothing_tames_the_outlier_channels():
    """Per-token int8 of the raw activations wastes most codes on the outlier channels; after
    smoothing the same rows quantize with a much smaller error."""
    x, w = T.make_inputs(seed=1, device="cpu", dtype="float32", M=64, N=48, K=388)
    raw_scale = x.abs().amax(dim=1, keepdim=True) / 127
    raw_err = (torch.round(x / raw_scale) * raw_scale - x).norm() / x.norm()
    qx, qw, sx, sw = T.smooth_quantize(x, w)
    y = (qx.double() * sx.double()[:, None]) @ (qw.double() * sw.double()[:, None]).T
    assert float((y - (x.double() @ w.double().T)).norm() / (x.double() @ w.double().T).norm()) < float(raw_err)
    assert qx.dtype == torch.int8 and int(qx.abs().max()) <= 127 and int(qw.abs().max()) <= 127


def test_dequantized_operands_are_exact_in_bf16():
    x, w = T.make_inputs(seed=2, device="cpu", dtype="int8", M=16, N=24, K=40)
    assert x.dtype == torch.bfloat16
    xd, wd = T.dequantize_bf16(x, w)
    qx, qw, sx, sw = T.smooth_quantize(x, w)
    assert torch.equal(xd.double(), qx.double() * sx.double()[:, None])
    assert torch.equal(wd.double(), qw.double() * sw.double()[:, None])


def test_int32_accumulation_is_exact_in_the_interpreter():
    x, w = T.make_inputs(seed=4, device="cpu", dtype="float32", M=40, N=33, K=300)
    assert torch.equal(K.w8a8_gemm(*K.quantize_w8a8(x, w)).double(), T.reference_fp64(x, w).float().double())
