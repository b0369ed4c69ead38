"""kernels/cpu_batch_invariant.py: accuracy at the claim's check shapes, and the property itself:
a row's output bits do not depend on the batch around it, nor on the thread count."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import kernels.cpu_batch_invariant as B

CLAIMS = Path(__file__).resolve().parents[2] / "claims"
CLAIM = yaml.safe_load((CLAIMS / "cpu-rmsnorm-batch-invariant.yaml").read_text())
CORR = CLAIM["correctness"]


def _assert_close(out, ref):
    out = out.to(torch.float64)
    assert out.shape == ref.shape and torch.isfinite(out).all()
    assert (out - ref).norm() / ref.norm() <= CORR["max_rel_l2"]
    assert ((out - ref).abs() <= CORR["atol"] * ref.abs().max() + CORR["rtol"] * ref.abs()).all()


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"])
def test_kernel_and_baseline_match_the_reference(params):
    x, w = B.make_inputs(seed=2, device="cpu", dtype=CLAIM["precision"]["dtype"], **params)
    ref = B.reference_fp64(x, w)
    _assert_close(B.batch_invariant_rms_norm(x, w), ref)
    _assert_close(B.torch_rms_norm(x, w), ref)


@pytest.mark.parametrize("hidden", [1, 37, 256, 1000, 4096, 5000])
def test_rows_are_bit_identical_alone_and_in_any_batch(hidden):
    x, w = B.make_inputs(seed=3, device="cpu", dtype="float32", rows=97, hidden=hidden)
    full = B.batch_invariant_rms_norm(x, w)
    for start, size in [(0, 1), (5, 1), (96, 1), (3, 17), (20, 33), (0, 64)]:
        assert torch.equal(B.batch_invariant_rms_norm(x[start:start + size], w), full[start:start + size])


def test_rows_are_bit_identical_across_thread_counts():
    x, w = B.make_inputs(seed=4, device="cpu", dtype="float32", rows=512, hidden=4096)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = B.batch_invariant_rms_norm(x, w)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(one, B.batch_invariant_rms_norm(x, w))


def test_fixed_order_sum_is_a_real_sum_and_order_matters():
    x = torch.randn(4, 1000, generator=torch.Generator().manual_seed(0))
    s = B._sum_squares_fixed_order(x)
    torch.testing.assert_close(s.double(), (x.double() ** 2).sum(dim=1), rtol=1e-6, atol=0)
    # The order is what fixes the bits: another summation order gives other bits for some row.
    y = torch.randn(64, 4096, generator=torch.Generator().manual_seed(1)) * 1e3
    assert not torch.equal(B._sum_squares_fixed_order(y), (y * y).flip(1).cumsum(1)[:, -1])


def test_seeds_differ():
    a = B.make_inputs(seed=0, device="cpu", dtype="float32", rows=3, hidden=8)
    b = B.make_inputs(seed=1, device="cpu", dtype="float32", rows=3, hidden=8)
    assert all(not torch.equal(p, q) for p, q in zip(a, b))
