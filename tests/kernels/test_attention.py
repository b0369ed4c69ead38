"""kernels/attention/: the fused attention kernel under the Triton interpreter, at each claim's
check shapes and tolerances, against float64 attention; the baselines too."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import assert_matches, check_sides, load_claim

import kernels.attention.kernel as A
import kernels.attention.task as AT
from claimbench.spec.expr import evaluate

IDS = ["attention-flash-vs-materialized", "attention-flash-causal-vs-materialized",
       "attention-flash-vs-sdpa", "attention-flash-causal-vs-sdpa",
       "attention-flash-vs-sdpa-cudnn", "attention-flash-causal-vs-sdpa-cudnn"]
# The kernel is the same in every claim of a causality; its two materialized claims check it at
# every check shape, the SDPA claims add only their baselines (the claims' own CPU runs repeat
# all of it).
KERNEL_IDS = IDS[:2]
CASES = [(cid, p) for cid in KERNEL_IDS for p in load_claim(cid)["workload"]["check_params"]]
BASELINES = {cid: load_claim(cid)["baseline"]["impl"].rpartition(":")[2] for cid in IDS[2:]}


@pytest.mark.parametrize("cid,params", CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_kernel_and_baseline_match_the_reference(cid, params):
    check_sides(load_claim(cid), params, seed=3)


@pytest.mark.parametrize("cid", sorted(BASELINES))
def test_sdpa_baselines_match_the_reference(cid):
    claim = load_claim(cid)
    args = AT.make_inputs(seed=4, device="cpu", dtype="float32", batch=1, heads=2, seqlen=150, head_dim=64)
    ref = (AT.reference_fp64_causal if "causal" in cid else AT.reference_fp64)(*args)
    assert_matches(getattr(AT, BASELINES[cid])(*args), ref, claim["correctness"], cid)


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


def _unchunked(q, k, v, causal):
    """The whole-matrix float64 formula the chunked reference replaced."""
    q, k, v = (t.double() for t in (q, k, v))
    s = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    if causal:
        n = q.shape[-2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("chunk_bytes", [8 * 50 * 7, 8 * 50 * 50 * 2, 1 << 28])
def test_chunked_reference_is_the_whole_matrix_formula(causal, chunk_bytes, monkeypatch):
    """Blocks of 7 rows (ragged against 50), groups of 2 of 3 heads, and one step: each gives the
    unchunked result, and no step's scores exceed the chunk."""
    q, k, v = AT.make_inputs(seed=5, device="cpu", dtype="float32", batch=2, heads=3, seqlen=50, head_dim=16)
    seen = []
    softmax = torch.softmax
    monkeypatch.setattr(torch, "softmax", lambda s, dim: seen.append(s.numel()) or softmax(s, dim=dim))
    out = AT.attention_fp64(q, k, v, causal=causal, chunk_bytes=chunk_bytes)
    monkeypatch.undo()
    assert out.dtype == torch.float64 and out.device == q.device
    torch.testing.assert_close(out, _unchunked(q, k, v, causal), rtol=1e-12, atol=1e-12)
    assert max(seen) * 8 <= max(chunk_bytes, 8 * 50)
    assert len(seen) > 1 or chunk_bytes == 1 << 28
