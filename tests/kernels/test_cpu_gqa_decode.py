"""kernels/gqa_decode/cpu.py: grouped decode and expanded multi-head decode agree with float64
attention at the claim's check shapes and tolerances."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import check_sides, load_claim

import kernels.gqa_decode.cpu as G
import kernels.gqa_decode.task as GT

CLAIM = load_claim("cpu-gqa-decode-vs-expanded")


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"])
def test_kernel_and_baseline_match_the_reference(params):
    check_sides(CLAIM, params, seed=9)    # gqa_decode; mha_decode over expand_kv


def test_baseline_streams_group_times_the_kv_bytes():
    p = CLAIM["workload"]["params"]
    small = dict(p, seqlen=64)          # same heads, short cache: the ratio is what matters
    q, k, v = GT.make_inputs(seed=0, device="cpu", dtype="float32", **small)
    _, ke, ve = GT.expand_kv(q, k, v)
    group = p["q_heads"] // p["kv_heads"]
    assert ke.numel() == group * k.numel() and ve.numel() == group * v.numel()
    assert ke.is_contiguous() and ve.is_contiguous()


def test_query_heads_read_their_own_kv_head():
    q, k, v = GT.make_inputs(seed=2, device="cpu", dtype="float32", batch=1, q_heads=6, kv_heads=3,
                            seqlen=23, head_dim=16)
    base = G.gqa_decode(q, k, v)
    v2 = v.clone()
    v2[:, 1] += 1.0                 # KV head 1 serves query heads 2 and 3 only
    moved = (G.gqa_decode(q, k, v2) - base).abs().amax(dim=-1)[0]
    assert (moved[2:4] > 0.5).all() and (moved[[0, 1, 4, 5]] == 0).all()


def test_seeds_differ_and_rejects_bad_heads():
    p = dict(batch=1, q_heads=4, kv_heads=2, seqlen=9, head_dim=16)
    a = GT.make_inputs(seed=0, device="cpu", dtype="float32", **p)
    b = GT.make_inputs(seed=1, device="cpu", dtype="float32", **p)
    assert all(not torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError):
        GT.make_inputs(seed=0, device="cpu", dtype="float32", batch=1, q_heads=5, kv_heads=2, seqlen=3, head_dim=4)
