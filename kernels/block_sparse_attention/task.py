"""Block-sparse attention task: Q, K, V and a block pattern, the float64 reference, and dense
``scaled_dot_product_attention`` with the pattern as a mask as the baseline.

The pattern is MInference's block-sparse kind: the sequence is cut into blocks of PATTERN = 128
tokens, and every query block attends to ``keep`` key blocks, the first block (the attention
sink), its own block, and others drawn from the seed (MInference estimates them online from the
queries; drawing them keeps the claim about the kernel, not the estimator). ``blocks`` holds, per
sequence and query block, the indices of its key blocks, shared by all heads. The function is
softmax over the kept positions only; no row is empty, since every query block keeps its own
block. The baseline's untimed ``to_dense_mask`` expands the pattern into a boolean (batch, 1,
seqlen, seqlen) mask and the baseline calls SDPA with it, which is what a practitioner without a
sparse kernel runs: dense work, masked. The sparse kernel is in ``kernel.py``.
"""

from __future__ import annotations

import torch

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


def dense_mask(blocks: torch.Tensor, seqlen: int) -> torch.Tensor:
    """Boolean (batch, 1, seqlen, seqlen): True where a query may attend to a key."""
    batch, nblocks, keep = blocks.shape
    blockmask = torch.zeros((batch, nblocks, nblocks), dtype=torch.bool, device=blocks.device)
    blockmask.scatter_(2, blocks.long(), True)
    mask = blockmask.repeat_interleave(PATTERN, dim=1).repeat_interleave(PATTERN, dim=2)
    return mask[:, None, :seqlen, :seqlen].contiguous()


def to_dense_mask(q, k, v, blocks):
    """Baseline prepare (untimed): the pattern as a dense boolean mask."""
    return q, k, v, dense_mask(blocks, q.shape[2])


def sdpa_masked(q, k, v, mask):
    """Baseline: torch scaled_dot_product_attention with the boolean mask (backend of PyTorch's
    choosing for a masked call)."""
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)


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
