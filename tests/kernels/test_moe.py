"""kernels/moe/: the expert-sorted tile table, the fused MoE GEMM under the interpreter, and the
grouped-GEMM baseline (``torch._grouped_mm``) against the float64 reference."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import assert_seeds_differ, load_claim

from kernels.moe import kernel as K
from kernels.moe import task as T

CLAIM = "moe-fused-experts-vs-grouped-mm"


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIM)


def test_tile_table_covers_every_pair_once_and_never_mixes_experts():
    ids = T.make_inputs(seed=9, device="cpu", dtype="float32", tokens=50, experts=6, topk=2, K=4, N=4)[2]
    pairs, expert, start, end, max_tiles = K._tile_table(ids, 6, 8)
    flat = ids.reshape(-1)
    seen = []
    for t in range(max_tiles):
        e = int(expert[t])
        if e < 0:
            continue
        rows = pairs[int(start[t]):int(end[t])].long()
        assert 0 < rows.numel() <= 8 and bool((flat[rows] == e).all())
        seen += rows.tolist()
    assert sorted(seen) == list(range(flat.numel()))


def test_an_expert_nobody_chose_costs_nothing_and_breaks_nothing():
    x, w, ids = T.make_inputs(seed=10, device="cpu", dtype="float32", tokens=20, experts=5, topk=2, K=16, N=8)
    ids = torch.where(ids == 4, torch.zeros_like(ids), ids)   # expert 4 unused (pairs may repeat an expert)
    out, ref = K.fused_moe(x, w, ids).double(), T.reference_fp64(x, w, ids)
    assert float((out - ref).norm() / ref.norm()) < 1e-6


# the claim's own bound at bfloat16 (its max_rel_l2); float32 is held far tighter
BOUND = {"float32": 1e-6, "bfloat16": load_claim(CLAIM)["correctness"]["max_rel_l2"]}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("shape", [dict(tokens=37, experts=8, topk=2, K=56, N=72),
                                   dict(tokens=64, experts=16, topk=4, K=32, N=24),
                                   dict(tokens=300, experts=2, topk=2, K=152, N=304)])
def test_grouped_mm_baseline_matches_the_reference(dtype, shape):
    x, w, ids = T.make_inputs(seed=3, device="cpu", dtype=dtype, **shape)
    out, ref = T.grouped_mm(x, w, ids), T.reference_fp64(x, w, ids)
    assert out.shape == ref.shape and out.dtype == x.dtype
    assert float((out.double() - ref).norm() / ref.norm()) < BOUND[dtype]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_grouped_mm_takes_experts_with_no_tokens_as_empty_groups(dtype):
    """Experts 0, 3 and 5 get no pairs: ``offs`` repeats an end (an empty group), first, inside and
    last; torch._grouped_mm runs it, and both sides still match the reference (the kernel in float32
    only: this Triton interpreter's bf16 ``tl.dot`` into a float32 accumulator returns garbage on CPU,
    which is why the claim's CPU checks run at its float32 check_dtype)."""
    x, w, ids = T.make_inputs(seed=11, device="cpu", dtype=dtype, tokens=24, experts=6, topk=2, K=16, N=8)
    ids = torch.stack([torch.full((24,), 1), torch.where(torch.arange(24) % 2 == 0, 2, 4)], 1).to(torch.int32)
    counts = torch.bincount(ids.reshape(-1).long(), minlength=6)
    assert counts[[0, 3, 5]].tolist() == [0, 0, 0]
    ref = T.reference_fp64(x, w, ids)
    sides = [T.grouped_mm] + ([K.fused_moe] if dtype == "float32" else [])
    for out in (side(x, w, ids) for side in sides):
        assert out.dtype == x.dtype
        assert float((out.double() - ref).norm() / ref.norm()) < BOUND[dtype]


def test_the_one_pair_check_shape_leaves_three_experts_empty():
    claim = load_claim(CLAIM)
    shape = next(p for p in claim["workload"]["check_params"] if p["tokens"] == 1)
    x, w, ids = T.make_inputs(seed=0, device="cpu", dtype="float32", **shape)
    assert int(torch.bincount(ids.reshape(-1).long(), minlength=shape["experts"]).eq(0).sum()) == shape["experts"] - 1
    ref = T.reference_fp64(x, w, ids)
    assert float((T.grouped_mm(x, w, ids).double() - ref).norm() / ref.norm()) < 1e-6


def test_check_shapes_meet_grouped_mm_stride_alignment():
    """torch._grouped_mm needs 16-byte strides: K (and N, for an unpadded output) multiples of 8 in
    bf16, the dtype the GPU run uses."""
    for p in load_claim(CLAIM)["workload"]["check_params"] + [load_claim(CLAIM)["workload"]["params"]]:
        assert p["K"] % 8 == 0 and p["N"] % 8 == 0, p
