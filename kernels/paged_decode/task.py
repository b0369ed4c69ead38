"""Paged-decode task: the contiguous-cache baseline. Inputs and the float64 reference are the
decode task's (``kernels/gqa_decode/task.py``): paging changes the layout, not the function.

The baseline's untimed ``to_contiguous`` hands the shared decode kernel (``decode.py``) the
(batch, kv_heads, seqlen, head_dim) cache as it is; ``contiguous_decode`` runs it with PAGED off.
The kernel (``kernel.py``) runs the same code reading K and V through a block table.
"""

from __future__ import annotations


def to_contiguous(q, k, v):
    """Baseline prepare (untimed): contiguous (batch, kv_heads, seqlen, head_dim) caches."""
    return q.contiguous(), k.contiguous(), v.contiguous()


def contiguous_decode(q, k, v):
    """Baseline: the same decode kernel over the contiguous cache."""
    # No block table: q stands in for the two unused pointers, so nothing extra is launched.
    from kernels.paged_decode.decode import launch
    return launch(q, k, v, q, q, k.shape[2], paged=False)
