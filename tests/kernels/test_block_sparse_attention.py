"""kernels/block_sparse_attention/: the pattern, and attention over its kept blocks under the
interpreter, against the masked float64 reference."""

from __future__ import annotations

import torch

from kernels.block_sparse_attention import kernel as K
from kernels.block_sparse_attention import task as T

CLAIM = "block-sparse-attention-vs-masked-sdpa"


def test_pattern_keeps_the_sink_and_the_diagonal_and_no_more():
    _, _, _, blocks = T.make_inputs(seed=7, device="cpu", dtype="float32", batch=2, heads=1,
                                    seqlen=1000, head_dim=16, keep=3)
    assert blocks.shape == (2, 8, 3)
    for b in range(2):
        for qb in range(8):
            row = blocks[b, qb].tolist()
            assert len(set(row)) == 3 and 0 in row and qb in row


def test_keeping_every_block_is_dense_attention():
    q, k, v, blocks = T.make_inputs(seed=8, device="cpu", dtype="float32", batch=1, heads=2,
                                    seqlen=200, head_dim=32, keep=99)
    dense = torch.softmax((q.double() @ k.double().transpose(-2, -1)) / 32 ** 0.5, dim=-1) @ v.double()
    out = K.block_sparse_attention(q, k, v, blocks).double()
    assert float((out - dense).norm() / dense.norm()) < 1e-6


def test_chunked_reference_is_the_dense_masked_formula():
    """Row blocks of 60 (not a multiple of the 128-token pattern) and one head at a time give what
    the whole (seqlen x seqlen) mask and score matrix gave."""
    q, k, v, blocks = T.make_inputs(seed=9, device="cpu", dtype="float32", batch=2, heads=2,
                                    seqlen=400, head_dim=16, keep=2)
    q64, k64, v64 = (t.double() for t in (q, k, v))
    s = (q64 @ k64.transpose(-2, -1)) / 16 ** 0.5
    whole = torch.softmax(s.masked_fill(~T.dense_mask(blocks, 400), float("-inf")), dim=-1) @ v64
    chunked = T.reference_fp64(q, k, v, blocks, chunk_bytes=8 * 400 * 60)
    torch.testing.assert_close(chunked, whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(T.reference_fp64(q, k, v, blocks), whole, rtol=1e-12, atol=1e-12)  # one step
