"""Paged-KV decode attention in Triton (list entry: PagedAttention and vLLM).

Mechanism. vLLM stores the KV cache in fixed-size physical blocks (pages of PAGE_SIZE = 16
tokens here, a common vLLM block size) allocated on demand, so a sequence's cache is scattered and a block
table maps (sequence, logical page) to a physical block. This kernel reads K and V through that
table: for each BLOCK_N-token tile it loads BLOCK_N / PAGE_SIZE block numbers and gathers the
pages. The untimed ``prepare`` builds the paged layout from the same K and V: pages placed at
shuffled physical block numbers (a fixed permutation, as a free list would hand them out),
the block table, and per-sequence lengths. The baseline is the same kernel reading the
contiguous (batch, kv_heads, seqlen, head_dim) cache directly; both use grouped-query tiles.

Why the cost should be small (implementer-report). Paging buys memory utilisation (the paper's
20.4-38.2% KV use in earlier systems, section 1, Figure 2), not speed; the claim is that indirection costs little.
At B=64, 32 query heads, 8 KV heads, S=4096, D=128, bf16, both sides must stream the
1.07 GB of K and V. The paged side also reads the block table, 64 * 256 * 4 B = 64 KB (0.006%),
and each page of one head is a contiguous 16 * 128 * 2 B = 4 KB run, far above the 32-128 B
sector/line granularity of HBM traffic, so coalescing is unchanged. What remains is address
arithmetic and a dependent load (block number, then page) at the start of each tile, which the
pipelined loads hide. Expected ratio (contiguous time / paged time) about 0.95-1.0; claimed 0.9
(tolerance 0.05): the paged kernel runs at 90% or more of the contiguous kernel's speed.

What only the GPU check covers. The CPU test runs the paged gather, the partial last page and
the grouped tiles under TRITON_INTERPRET=1 in float32 with small blocks, and
tests/kernels/test_triton_sm90.py compiles both layouts for sm_90 at GPU_CONFIG without spills
(at 4 warps the paged gather spilled, hence 8); bf16 accuracy and the overhead itself need an
H100/H200.
"""

from __future__ import annotations

import torch
import triton

from kernels.paged_decode.decode import PAGE_SIZE, launch


def to_paged(q, k, v):
    """Kernel prepare (untimed): pages at shuffled physical blocks, block table, lengths."""
    batch, kv_heads, seqlen, head_dim = k.shape
    pages = triton.cdiv(seqlen, PAGE_SIZE)
    perm = torch.randperm(batch * pages, generator=torch.Generator().manual_seed(0))
    perm = perm.to(k.device)

    def paged(t):
        padded = t.new_zeros(batch, kv_heads, pages * PAGE_SIZE, head_dim)
        padded[:, :, :seqlen] = t
        logical = padded.view(batch, kv_heads, pages, PAGE_SIZE, head_dim).transpose(1, 2)
        cache = t.new_empty(batch * pages, kv_heads, PAGE_SIZE, head_dim)
        cache[perm] = logical.reshape(batch * pages, kv_heads, PAGE_SIZE, head_dim)
        return cache

    block_table = perm.view(batch, pages).to(torch.int32).contiguous()
    seq_lens = torch.full((batch,), seqlen, dtype=torch.int32, device=k.device)
    return q.contiguous(), paged(k), paged(v), block_table, seq_lens


def paged_decode(q, k_cache, v_cache, block_table, seq_lens):
    """Kernel: decode attention reading K and V through the block table."""
    return launch(q, k_cache, v_cache, block_table, seq_lens, 0, paged=True)
