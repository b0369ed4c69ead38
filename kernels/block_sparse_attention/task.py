"""Block-sparse attention task: Q, K, V and a block pattern, the float64 reference, and
``flex_attention`` with a ``BlockMask`` made from the same pattern as the baseline.

The pattern is MInference's block-sparse kind: the sequence is cut into blocks of PATTERN = 128
tokens, and every query block attends to ``keep`` key blocks, the first block (the attention
sink), its own block, and others drawn from the seed (MInference estimates them online from the
queries; drawing them keeps the claim about the kernel, not the estimator). ``blocks`` holds, per
sequence and query block, the indices of its key blocks, shared by all heads. The function is
softmax over the kept positions only; no row is empty, since every query block keeps its own
block. The sparse kernel is in ``kernel.py``.

The baseline is what a practitioner with PyTorch alone runs for a block pattern: FlexAttention
(``torch.nn.attention.flex_attention``) with a ``BlockMask`` at the same 128-token blocks, which
computes only the kept blocks too. Its untimed ``to_flex_blocks`` turns ``blocks`` into flex's
block tables, the ones ``create_block_mask`` builds for this pattern (``tests/kernels/
test_block_sparse_attention.py`` holds them equal): a kept block of whole tokens is a *full* block
(flex skips ``mask_mod`` there), a kept block on the ragged last row or column (seqlen not a
multiple of 128) is a *partial* one, where ``mask_mod`` and flex's bounds checks cut it at
seqlen. The timed ``flex_block_sparse`` wraps the tables in a ``BlockMask``
(``BlockMask.from_kv_blocks``: no mask evaluation, no q-side tables since only the forward runs)
and calls flex_attention. On CUDA that is ``torch.compile(flex_attention, dynamic=False)``, as
FlexAttention is meant to run (one fused Triton kernel that skips the dropped blocks); it is
compiled on the first CUDA call and cached here, each check shape compiling its own kernel (the
harness points Inductor's and Triton's caches at the run's scratch folder). On CPU the check runs
flex's eager path, which builds the whole score matrix and applies ``mask_mod`` everywhere (it
ignores the block tables): the CPU check holds ``mask_mod`` to the reference, the test holds the
tables to ``create_block_mask``'s, and only the GPU runs the compiled kernel that skips blocks.
"""

from __future__ import annotations

import warnings
from functools import cache

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention

from kernels.attention.task import REFERENCE_CHUNK_BYTES, attention_fp64

PATTERN = 128


def make_inputs(*, seed: int, device: str, dtype: str, batch: int, heads: int, seqlen: int,
                head_dim: int, keep: int):
    """q, k, v (batch, heads, seqlen, head_dim) and blocks (batch, query blocks, keep) int32."""
    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    q, k, v = (torch.randn((batch, heads, seqlen, head_dim), generator=g).to(device=device, dtype=dt)
               for _ in range(3))
    nblocks = -(-seqlen // PATTERN)
    keep = min(keep, nblocks)
    rows = []
    for _ in range(batch):
        per_seq = []
        for qb in range(nblocks):
            chosen = [0] + ([qb] if qb else [])
            for c in torch.randperm(nblocks, generator=g).tolist():
                if len(chosen) >= keep:
                    break
                if c not in chosen:
                    chosen.append(c)
            per_seq.append(sorted(chosen[:keep]))
        rows.append(per_seq)
    blocks = torch.tensor(rows, dtype=torch.int32, device=device)
    return q, k, v, blocks


def kept_blocks(blocks: torch.Tensor) -> torch.Tensor:
    """Boolean (batch, query blocks, key blocks): True where a query block keeps a key block."""
    batch, nblocks, _ = blocks.shape
    kept = torch.zeros((batch, nblocks, nblocks), dtype=torch.bool, device=blocks.device)
    return kept.scatter_(2, blocks.long(), True)


def dense_mask(blocks: torch.Tensor, seqlen: int) -> torch.Tensor:
    """Boolean (batch, 1, seqlen, seqlen): True where a query may attend to a key."""
    mask = kept_blocks(blocks).repeat_interleave(PATTERN, dim=1).repeat_interleave(PATTERN, dim=2)
    return mask[:, None, :seqlen, :seqlen].contiguous()


def _ordered(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """flex's (num_blocks, indices) of a boolean (batch, rows, cols) block table, with a head
    dimension of 1 (broadcast over heads): per row the count of True blocks, and the column
    indices, True ones first, each group in ascending order (as ``create_block_mask`` orders them)."""
    d = dense.to(torch.int32)
    num = d.sum(-1, dtype=torch.int32)
    idx = torch.argsort(d, dim=-1, descending=True, stable=True).to(torch.int32)
    return num[:, None].contiguous(), idx[:, None].contiguous()


def to_flex_blocks(q, k, v, blocks):
    """Baseline prepare (untimed): q, k, v, flex's partial and full block tables
    (kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices; int32, head dim 1) and the
    boolean block table ``mask_mod`` reads."""
    kept = kept_blocks(blocks)
    nblocks = kept.shape[1]
    whole = torch.ones(nblocks, dtype=torch.bool, device=blocks.device)
    if q.shape[2] % PATTERN:
        whole[-1] = False  # the ragged last block: partial wherever it is kept
    full = kept & whole[:, None] & whole[None, :]
    return (q, k, v, *_ordered(kept & ~full), *_ordered(full), kept)


@cache
def _compiled_flex():
    """flex_attention under torch.compile, built on the first CUDA call (nothing at import);
    dynamic=False gives each shape its own specialized kernel, as the claim's one shape runs."""
    return torch.compile(flex_attention, dynamic=False)


def block_mask(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, kept, seqlen: int) -> BlockMask:
    """The BlockMask of ``to_flex_blocks``'s tables: no mask evaluation, and no q-side tables
    (only the backward reads them); ``mask_mod`` reads the boolean block table, which flex applies
    in partial blocks (and everywhere on its eager path)."""

    def mask_mod(b, h, q_idx, kv_idx):
        return kept[b, q_idx // PATTERN, kv_idx // PATTERN]

    return BlockMask.from_kv_blocks(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices,
                                    BLOCK_SIZE=PATTERN, mask_mod=mask_mod, seq_lengths=(seqlen, seqlen),
                                    compute_q_blocks=False)


def flex_block_sparse(q, k, v, kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, kept):
    """Baseline: flex_attention with a BlockMask over the kept 128-token blocks (compiled on CUDA,
    flex's eager reference path on CPU)."""
    mask = block_mask(kv_num_blocks, kv_indices, full_kv_num_blocks, full_kv_indices, kept, q.shape[2])
    if q.is_cuda:
        return _compiled_flex()(q, k, v, block_mask=mask)
    with warnings.catch_warnings():  # the eager path is the CPU check's on purpose; flex warns that it is slow
        warnings.filterwarnings("ignore", message="flex_attention called without torch.compile", category=UserWarning)
        return flex_attention(q, k, v, block_mask=mask)


def reference_fp64(q, k, v, blocks, *, chunk_bytes: int = REFERENCE_CHUNK_BYTES):
    """Masked softmax attention in float64 on the inputs' device, a block of query rows at a
    time (``attention_fp64``): each step expands only its own rows of the pattern, so neither the
    (seqlen x seqlen) mask nor the score matrix exists whole."""
    nblocks = blocks.shape[1]
    n = q.shape[2]
    keyblock = torch.arange(n, device=q.device) // PATTERN

    def allowed(b, r0, r1):
        blockmask = torch.zeros((nblocks, nblocks), dtype=torch.bool, device=q.device)
        blockmask.scatter_(1, blocks[b].to(device=q.device, dtype=torch.long), True)
        return blockmask[torch.arange(r0, r1, device=q.device) // PATTERN][:, keyblock]

    return attention_fp64(q, k, v, allowed=allowed, chunk_bytes=chunk_bytes)
