"""kernels/attention/: the fused attention kernel under the Triton interpreter, at each claim's
check shapes and tolerances, against float64 attention; the baselines too."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import check_sides, load_claim

import kernels.attention.kernel as A
import kernels.attention.task as AT
from claimbench.expr import evaluate

IDS = ["attention-flash-vs-materialized", "attention-flash-causal-vs-materialized",
       "attention-flash-vs-sdpa", "attention-flash-causal-vs-sdpa"]


CASES = [(cid, p) for cid in IDS for p in load_claim(cid)["workload"]["check_params"]]


@pytest.mark.parametrize("cid,params", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_kernel_and_baseline_match_the_reference(cid, params):
    check_sides(load_claim(cid), params, seed=3)


def test_causal_masks_the_future_and_differs_from_full_attention():
    q, k, v = AT.make_inputs(seed=1, device="cpu", dtype="float32", batch=1, heads=2, seqlen=41, head_dim=32)
    causal = A.flash_attention_causal(q, k, v)
    # Row 0 attends only to key 0; changing later keys and values must not move early rows.
    torch.testing.assert_close(causal[:, :, 0], v[:, :, 0], rtol=1e-6, atol=1e-6)
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 20:] += 1.0
    v2[:, :, 20:] -= 1.0
    assert torch.equal(A.flash_attention_causal(q, k2, v2)[:, :, :20], causal[:, :, :20])
    assert not torch.allclose(A.flash_attention(q, k, v), causal)


def test_seeds_differ_and_kernel_is_deterministic():
    p = dict(batch=1, heads=1, seqlen=19, head_dim=16)
    a = AT.make_inputs(seed=0, device="cpu", dtype="float32", **p)
    b = AT.make_inputs(seed=1, device="cpu", dtype="float32", **p)
    assert all(not torch.equal(x, y) for x, y in zip(a, b))
    assert torch.equal(A.flash_attention(*a), A.flash_attention(*a))


def test_claims_state_the_work_they_time():
    for cid in IDS:
        w = load_claim(cid)["workload"]
        p = w["params"]
        full = 4 * p["batch"] * p["heads"] * p["seqlen"] ** 2 * p["head_dim"]
        assert evaluate(w["flops"], p) == (full // 2 if "causal" in cid else full)
