"""kernels/paged_decode/: decode through a block table (kernel) and on a contiguous cache
(baseline), both through the Triton interpreter, at the claim's check shapes and tolerances."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import check_sides, load_claim

import kernels.gqa_decode.task as GT
import kernels.paged_decode.decode as PD
import kernels.paged_decode.kernel as P

CLAIM = load_claim("paged-decode-vs-contiguous")


@pytest.mark.parametrize("params", CLAIM["workload"]["check_params"] + [
    dict(batch=2, q_heads=8, kv_heads=2, seqlen=64, head_dim=32)])   # whole pages only
def test_kernel_and_baseline_match_the_reference(params):
    check_sides(CLAIM, params, seed=7)    # paged_decode over to_paged; contiguous_decode over to_contiguous


def test_paged_layout_is_a_shuffled_page_table():
    q, k, v = GT.make_inputs(seed=0, device="cpu", dtype="float32", batch=3, q_heads=4, kv_heads=2,
                            seqlen=37, head_dim=8)
    _, kc, vc, table, lens = P.to_paged(q, k, v)
    pages = -(-37 // PD.PAGE_SIZE)
    assert table.shape == (3, pages) and table.dtype == torch.int32
    assert sorted(table.flatten().tolist()) == list(range(3 * pages))       # a permutation
    assert not torch.equal(table.flatten(), torch.arange(3 * pages, dtype=torch.int32))  # shuffled
    assert lens.tolist() == [37, 37, 37]
    for b in range(3):
        for t in (0, 15, 16, 36):
            blk, slot = table[b, t // PD.PAGE_SIZE], t % PD.PAGE_SIZE
            assert torch.equal(kc[blk, :, slot], k[b, :, t]) and torch.equal(vc[blk, :, slot], v[b, :, t])


def test_kernel_follows_the_block_table():
    inputs = GT.make_inputs(seed=1, device="cpu", dtype="float32", batch=2, q_heads=4, kv_heads=2,
                           seqlen=40, head_dim=16)
    q, kc, vc, table, lens = P.to_paged(*inputs)
    out = P.paged_decode(q, kc, vc, table, lens)
    swapped = table.clone()
    swapped[[0, 1]] = table[[1, 0]]          # sequences 0 and 1 exchange their pages
    assert torch.allclose(P.paged_decode(q, kc, vc, swapped, lens),
                          GT.reference_fp64(q, *[t.flip(0) for t in inputs[1:]]).float(), atol=1e-5)
    assert not torch.allclose(out, P.paged_decode(q, kc, vc, swapped, lens))


def test_seeds_differ_and_kernel_is_deterministic():
    p = dict(batch=1, q_heads=4, kv_heads=2, seqlen=9, head_dim=16)
    a = GT.make_inputs(seed=0, device="cpu", dtype="float32", **p)
    b = GT.make_inputs(seed=1, device="cpu", dtype="float32", **p)
    assert all(not torch.equal(x, y) for x, y in zip(a, b))
    ops = P.to_paged(*a)
    assert torch.equal(P.paged_decode(*ops), P.paged_decode(*ops))
