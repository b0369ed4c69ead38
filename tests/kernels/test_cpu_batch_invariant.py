"""kernels/batch_invariant/cpu_rmsnorm.py: accuracy at the claim's check shapes, and the property itself:
a row's output bits do not depend on the batch around it, nor on the thread count."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import check_sides, load_claim

import kernels.batch_invariant.cpu_rmsnorm as B
import kernels.batch_invariant.task as BT

CLAIM = load_claim("cpu-rmsnorm-batch-invariant")


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"])
def test_kernel_and_baseline_match_the_reference(params):
    check_sides(CLAIM, params, seed=2)    # batch_invariant_rms_norm; torch_rms_norm


@pytest.mark.parametrize("hidden", [1, 37, 256, 1000, 4096, 5000])
def test_rows_are_bit_identical_alone_and_in_any_batch(hidden):
    x, w = BT.make_rmsnorm_inputs(seed=3, device="cpu", dtype="float32", rows=97, hidden=hidden)
    full = B.batch_invariant_rms_norm(x, w)
    for start, size in [(0, 1), (5, 1), (96, 1), (3, 17), (20, 33), (0, 64)]:
        assert torch.equal(B.batch_invariant_rms_norm(x[start:start + size], w), full[start:start + size])


def test_rows_are_bit_identical_across_thread_counts():
    x, w = BT.make_rmsnorm_inputs(seed=4, device="cpu", dtype="float32", rows=512, hidden=4096)
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
    a = BT.make_rmsnorm_inputs(seed=0, device="cpu", dtype="float32", rows=3, hidden=8)
    b = BT.make_rmsnorm_inputs(seed=1, device="cpu", dtype="float32", rows=3, hidden=8)
    assert all(not torch.equal(p, q) for p, q in zip(a, b))
