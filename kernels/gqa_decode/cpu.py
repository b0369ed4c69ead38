"""Grouped-query attention decode on CPU, against multi-head decode over an expanded KV cache
(list entry: Grouped-Query Attention).

Mechanism. With G = q_heads / kv_heads query heads per KV head, decode attention can score the
G queries of a group against their shared K and V in one batched matmul: the queries become a
(G, D) matrix per KV head, and each K and V element is read from memory once for G heads. The
baseline is the same attention as multi-head decode: its untimed ``prepare`` copies every KV
head to each query head of its group (``repeat_interleave``), so it computes the same function
but streams G times the KV bytes, with a (1, D) query per head.

Why it wins, and the claimed value (implementer-report). batch = 2, 32 query heads, 8 KV heads,
seqlen 4096, head_dim 128, float32:
- GQA reads K+V once: 2 * 2 * 8 * 4096 * 128 * 4 B = 67 MB;
- the expanded cache is 268 MB. Both exceed a 32 MB L3, so both stream from DRAM.
- Arithmetic: 2 * G FLOPs per 4-byte K or V element, 2 FLOP/byte at G = 4: DRAM-bound on both
  sides on a 2-core machine (~15-25 GB/s here against ~160 GFLOP/s of float32 matmul).
- Scores and softmax touch B * Hq * S * 4 B = 1 MB, negligible.
Ideal speedup is the byte ratio, G = 4. The claimed value is a bound that holds on other machines
than this one. Both sides do the same 134 MFLOP. While the 268 MB expanded cache cannot stay in the
last-level cache, the baseline streams at least 268 MB and the kernel takes at most 67 MB / W +
134 MFLOP / F (W the DRAM bandwidth, F the rate the G-row matmuls reach), so the speedup is at
least 4 / (1 + 2W/F). Claimed 2.0 (tolerance 0.2, threshold 1.6): it holds while F >= 1.33 W,
i.e. 39 GFLOP/s on a 2-core AMD EPYC (29.6 GB/s; a fifth of its 0.19 TFLOP/s float32 rate) and
37 GFLOP/s on a 2-core Intel Xeon (28 GB/s; a tenth of 0.35 TFLOP/s).
Measured: AMD EPYC, 2 cores, 32 MB L3, quiet: 3.49-3.63 (four runs, protocol 3); Intel Xeon
(family 6 model 207), 2 vCPUs, 260 MB L3, busy: 3.5-3.7 as best-of-45 single-thread ratios, no
publishable run; another 2-core x86 machine, busy: 1.88 [1.47, 2.09] (reported in issue 13).
"""

from __future__ import annotations

import math

import torch


def gqa_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Kernel: each KV head's G query heads scored together; K and V read once."""
    batch, q_heads, head_dim = q.shape
    kv_heads = k.shape[1]
    group = q_heads // kv_heads
    qg = q.reshape(batch, kv_heads, group, head_dim) * (1.0 / math.sqrt(head_dim))
    scores = torch.matmul(qg, k.transpose(-1, -2))
    return torch.matmul(torch.softmax(scores, dim=-1), v).reshape(batch, q_heads, head_dim)
