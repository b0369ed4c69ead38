"""kernels/cpu_fused_softmax.py: the fused and the naive softmax agree with float64 softmax at the
claim's check shapes and tolerances; the reference itself is checked against torch.softmax."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

import kernels.cpu_fused_softmax as S

CLAIM = yaml.safe_load((Path(__file__).resolve().parents[2] / "claims" / "cpu-softmax-fused-vs-naive.yaml").read_text())
CORR = CLAIM["correctness"]


def _assert_close(out, ref):
    out = out.to(torch.float64)
    assert out.shape == ref.shape and torch.isfinite(out).all()
    assert (out - ref).norm() / ref.norm() <= CORR["max_rel_l2"]
    assert ((out - ref).abs() <= CORR["atol"] * ref.abs().max() + CORR["rtol"] * ref.abs()).all()


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"])
def test_kernel_and_baseline_match_the_reference(params):
    (x,) = S.make_inputs(seed=6, device="cpu", dtype=CLAIM["precision"]["dtype"], **params)
    ref = S.reference_fp64(x)
    _assert_close(S.fused_softmax(x), ref)
    _assert_close(S.naive_softmax(x), ref)


def test_reference_is_softmax_and_survives_large_logits():
    x = torch.tensor([[1000.0, 999.0, -5.0], [0.0, 0.0, 0.0]])
    ref = S.reference_fp64(x)
    torch.testing.assert_close(ref, torch.softmax(x.double(), dim=-1))
    assert torch.isfinite(S.naive_softmax(x)).all()


def test_seeds_differ():
    (a,) = S.make_inputs(seed=0, device="cpu", dtype="float32", rows=2, cols=5)
    (b,) = S.make_inputs(seed=1, device="cpu", dtype="float32", rows=2, cols=5)
    assert not torch.equal(a, b)
