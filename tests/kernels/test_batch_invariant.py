"""kernels/batch_invariant/ in the Triton interpreter: accuracy, and rows that do not depend on
the batch they were computed in (the claims' ``batch-invariant`` property)."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import assert_seeds_differ, load_claim

from kernels.batch_invariant import matmul as BM
from kernels.batch_invariant import rmsnorm as BR
from kernels.batch_invariant import task as BT
from kernels.matmul import task as MT

CLAIMS = ["rmsnorm-batch-invariant-cost", "matmul-batch-invariant-cost"]
SLICES = [slice(0, 1), slice(0, 16), slice(5, 21), slice(36, 37)]


@pytest.mark.parametrize("claim_id", CLAIMS)
def test_seeds_give_different_inputs(claim_id):
    assert_seeds_differ(claim_id)


@pytest.mark.parametrize("rows", [slice(0, 1), slice(2, 9), slice(0, 37)])
def test_rmsnorm_rows_are_bitwise_the_same_in_any_batch(rows):
    x, w = BT.make_rmsnorm_inputs(seed=9, device="cpu", dtype="float32", rows=37, hidden=100)
    full = BR.rmsnorm_batch_invariant(x, w)
    part = BR.rmsnorm_batch_invariant(x[rows].contiguous(), w)
    assert torch.equal(full[rows], part)


@pytest.mark.parametrize("rows", SLICES)
def test_matmul_rows_are_bitwise_the_same_in_any_batch(rows):
    """A slice moves rows to other positions inside their tiles and changes the tile count."""
    a, b = MT.make_inputs(seed=10, device="cpu", dtype="float32", M=37, N=40, K=70)
    full = BM.matmul_batch_invariant(a, b)
    part = BM.matmul_batch_invariant(a[rows], b)
    assert torch.equal(full[rows], part)


def test_tile_count_is_the_one_the_derivation_uses():
    """The claimed 0.4 counts 64 tiles of 128x128 at M=256, N=4096: 64 of 132 SMs busy."""
    params = load_claim("matmul-batch-invariant-cost")["workload"]["params"]
    cfg = BM.MATMUL_CONFIG
    tiles = -(-params["M"] // cfg["BLOCK_M"]) * -(-params["N"] // cfg["BLOCK_N"])
    assert tiles == 64
