"""kernels/cpu_softmax/: the fused and the naive softmax agree with float64 softmax at the
claim's check shapes and tolerances; the reference itself is checked against torch.softmax."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import check_sides, load_claim

import kernels.cpu_softmax.task as S

CLAIM = load_claim("cpu-softmax-fused-vs-naive")


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"])
def test_kernel_and_baseline_match_the_reference(params):
    check_sides(CLAIM, params, seed=6)    # fused_softmax; naive_softmax


def test_reference_is_softmax_and_survives_large_logits():
    x = torch.tensor([[1000.0, 999.0, -5.0], [0.0, 0.0, 0.0]])
    ref = S.reference_fp64(x)
    torch.testing.assert_close(ref, torch.softmax(x.double(), dim=-1))
    assert torch.isfinite(S.naive_softmax(x)).all()


def test_seeds_differ():
    (a,) = S.make_inputs(seed=0, device="cpu", dtype="float32", rows=2, cols=5)
    (b,) = S.make_inputs(seed=1, device="cpu", dtype="float32", rows=2, cols=5)
    assert not torch.equal(a, b)
