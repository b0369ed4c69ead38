"""kernels/gqa_decode/: grouped decode (kernel) and expanded multi-head decode (baseline), both
through the Triton interpreter, at the claim's check shapes and tolerances."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import check_sides, load_claim

import kernels.gqa_decode.kernel as G
import kernels.gqa_decode.task as GT

CLAIM = load_claim("gqa-decode-vs-expanded-mha")


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"] + [
    dict(batch=1, q_heads=34, kv_heads=2, seqlen=19, head_dim=8)])   # group 17 pads to 32 rows
def test_kernel_and_baseline_match_the_reference(params):
    check_sides(CLAIM, params, seed=5)    # gqa_decode; mha_decode over expand_kv


def test_expanded_layout_copies_each_kv_head_to_its_group():
    q, k, v = GT.make_inputs(seed=0, device="cpu", dtype="float32", batch=2, q_heads=8, kv_heads=2,
                            seqlen=5, head_dim=4)
    _, ke, ve = GT.expand_kv(q, k, v)
    assert ke.shape == (2, 8, 5, 4) and ve.shape == (2, 8, 5, 4)
    for h in range(8):
        assert torch.equal(ke[:, h], k[:, h // 4]) and torch.equal(ve[:, h], v[:, h // 4])


def test_query_heads_read_their_own_kv_head():
    q, k, v = GT.make_inputs(seed=2, device="cpu", dtype="float32", batch=1, q_heads=6, kv_heads=3,
                            seqlen=23, head_dim=16)
    base = G.gqa_decode(q, k, v)
    v2 = v.clone()
    v2[:, 1] += 1.0                 # KV head 1 serves query heads 2 and 3 only
    moved = (G.gqa_decode(q, k, v2) - base).abs().amax(dim=-1)[0]
    assert (moved[2:4] > 0.5).all() and (moved[[0, 1, 4, 5]] == 0).all()


def test_seeds_differ_and_kernel_is_deterministic():
    p = dict(batch=1, q_heads=4, kv_heads=2, seqlen=9, head_dim=16)
    a = GT.make_inputs(seed=0, device="cpu", dtype="float32", **p)
    b = GT.make_inputs(seed=1, device="cpu", dtype="float32", **p)
    assert all(not torch.equal(x, y) for x, y in zip(a, b))
    assert torch.equal(G.gqa_decode(*a), G.gqa_decode(*a))


def test_rejects_a_head_count_that_does_not_divide():
    with pytest.raises(ValueError):
        GT.make_inputs(seed=0, device="cpu", dtype="float32", batch=1, q_heads=5, kv_heads=2,
                       seqlen=3, head_dim=8)
    q, k, v = GT.make_inputs(seed=0, device="cpu", dtype="float32", batch=1, q_heads=4, kv_heads=2,
                             seqlen=3, head_dim=8)
    with pytest.raises(ValueError):
        G.gqa_decode(q[:, :3], k, v)


def test_chunked_reference_is_the_whole_cache_formula():
    """Two batch rows a step (ragged against 5) give what the whole float64 cache gave."""
    q, k, v = GT.make_inputs(seed=6, device="cpu", dtype="float32", batch=5, q_heads=8, kv_heads=2,
                            seqlen=33, head_dim=16)
    q64, k64, v64 = (t.double() for t in (q, k, v))
    kx, vx = (t.repeat_interleave(4, dim=1) for t in (k64, v64))
    s = torch.einsum("bhd,bhnd->bhn", q64, kx) / 16 ** 0.5
    whole = torch.einsum("bhn,bhnd->bhd", torch.softmax(s, dim=-1), vx)
    row = 16 * k[:1].numel()
    torch.testing.assert_close(GT.grouped_decode_fp64(q, k, v, chunk_bytes=2 * row), whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(GT.reference_fp64(q, k, v), whole, rtol=1e-12, atol=1e-12)
