"""The Triton kernels in the interpreter at their GPU tile sizes, at the claims' multi-tile shapes.

The claims' CPU checks run the interpreter at small tiles, where every loop has many trips. On a
GPU the same check shapes run at the GPU's tiles (128x256 GEMM tiles, 4096-wide softmax chunks,
128x64 attention tiles): this runs that configuration here (CLAIMBENCH_GPU_TILES=1, read by
kernels/launch.py), so the multi-tile loops, the masks and the ragged tails the GPU will run are
checked on CPU before a GPU ever sees them. Every check shape runs; each claim has at least one
that spans several GPU tiles with a ragged tail in each tiled dimension.
"""

from __future__ import annotations

import pytest
from kernel_claims import check_sides, load_claim

TRITON_CLAIMS = [
    "attention-flash-vs-materialized", "attention-flash-causal-vs-materialized",
    "gqa-decode-vs-expanded-mha", "paged-decode-vs-contiguous",
    "softmax-online-vs-three-pass", "matmul-grouped-4096-vs-cublas", "matmul-grouped-skinny-vs-cublas",
    "matmul-persistent-vs-grouped", "matmul-batch-invariant-cost", "rmsnorm-batch-invariant-cost",
    "matmul-fp8-triton-vs-scaled-mm", "streamk-vs-data-parallel", "gemv-int4-vs-bf16", "roofline-copy-gbps",
    "sgemm-blocktiled-vs-cublas", "w8a8-int8-gemm-vs-bf16-cublas", "splitkv-decode-vs-single-pass",
    "kivi-4bit-kv-decode-vs-bf16", "block-sparse-attention-vs-flex-attention", "moe-fused-experts-vs-grouped-mm",
]


@pytest.mark.slow
@pytest.mark.parametrize("claim_id", TRITON_CLAIMS)
def test_gpu_tiles_at_the_multi_tile_shape(claim_id, monkeypatch):
    monkeypatch.setenv("CLAIMBENCH_GPU_TILES", "1")
    claim = load_claim(claim_id)
    for params in claim["workload"]["check_params"]:
        check_sides(claim, params, seed=7)
