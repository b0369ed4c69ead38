"""kernels/weight_only_gemv/: int4 packing, the Triton GEMV under the interpreter and the
dequantized bf16 baseline, at the claim's check shapes and tolerances."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import check_sides, load_claim

import kernels.weight_only_gemv.kernel as W
import kernels.weight_only_gemv.task as WT

CLAIM = load_claim("gemv-int4-vs-bf16")


def _unpack(packed, cols):
    nibbles = [(packed.to(torch.int64) >> (4 * s)) & 0xF for s in range(8)]
    return (torch.stack(nibbles, dim=-1).reshape(packed.shape[0], -1)[:, :cols] - 8)


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"])
def test_kernel_and_baseline_match_the_dequantized_reference(params):
    check_sides(CLAIM, params, seed=11)   # int4_gemv over quantize_int4; dense_gemv over dequantize_bf16


def test_packing_round_trips_and_stays_in_int4():
    x, w = WT.make_inputs(seed=0, device="cpu", dtype="float32", rows=9, cols=45)
    _, packed, scale = W.quantize_int4(x, w)
    q, s = WT.quantize_rows(w)
    assert packed.dtype == torch.int32 and packed.shape == (9, 6)
    codes = _unpack(packed, 45)
    assert torch.equal(codes, q.to(torch.int64)) and codes.min() >= -8 and codes.max() <= 7
    assert torch.equal(scale, s)
    # Quantization is close to the weights it replaces (within half a step per element).
    assert ((q * s[:, None] - w).abs() <= 0.5 * s[:, None] + 1e-6).all()


def test_kernel_reads_every_nibble():
    x, w = WT.make_inputs(seed=4, device="cpu", dtype="float32", rows=3, cols=16)
    xo, packed, scale = W.quantize_int4(x, w)
    base = W.int4_gemv(xo, packed, scale)
    for s in range(8):
        flipped = packed.clone()
        flipped[1, 1] ^= 1 << (4 * s)          # change one code of row 1 (column 8 + s)
        moved = (W.int4_gemv(xo, flipped, scale) - base).abs()[0]
        assert moved[1] > 0 and moved[0] == 0 and moved[2] == 0


def test_seeds_differ_and_kernel_is_deterministic():
    a = WT.make_inputs(seed=0, device="cpu", dtype="float32", rows=7, cols=24)
    b = WT.make_inputs(seed=1, device="cpu", dtype="float32", rows=7, cols=24)
    assert all(not torch.equal(x, y) for x, y in zip(a, b))
    ops = W.quantize_int4(*a)
    assert torch.equal(W.int4_gemv(*ops), W.int4_gemv(*ops))


def test_zero_row_gets_a_finite_scale():
    x, w = WT.make_inputs(seed=0, device="cpu", dtype="float32", rows=3, cols=10)
    w[1] = 0
    out = W.int4_gemv(*W.quantize_int4(x, w))
    assert torch.isfinite(out).all() and out[0, 1] == 0


def test_an_int4_claim_gets_bf16_operands():
    """The GPU run passes the claim's dtype, int4, which torch cannot make a tensor of: the 4-bit
    codes are the kernel's prepare, the operands bf16 (the baseline's dtype)."""
    x, w = WT.make_inputs(seed=0, device="cpu", dtype="int4", rows=3, cols=16)
    assert x.dtype == w.dtype == torch.bfloat16 and w.shape == (3, 16)
