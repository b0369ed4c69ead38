"""kernels/splitkv_decode/: split-KV decode and its log-sum-exp merge under the interpreter."""

from __future__ import annotations

from kernels.gqa_decode import task as GT
from kernels.splitkv_decode import kernel as S

CLAIM = "splitkv-decode-vs-single-pass"


def test_the_merge_is_exact_whatever_the_chunking(monkeypatch):
    """Chunks of 16, 32 and 64 tokens (many, few, one for a 60-token cache) merge to the same
    attention, to float32 rounding."""
    q, k, v = GT.make_inputs(seed=5, device="cpu", dtype="float32", batch=2, q_heads=4, kv_heads=2,
                             seqlen=60, head_dim=32)
    ref = GT.reference_fp64(q, k, v)
    for chunk in (16, 32, 64):
        monkeypatch.setitem(S.CPU_CONFIG, "CHUNK", chunk)
        out = S.splitkv_decode(q, k, v).double()
        assert float((out - ref).norm() / ref.norm()) < 1e-6, chunk
