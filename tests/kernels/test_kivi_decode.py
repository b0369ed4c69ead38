"""kernels/kivi_decode/: the 4-bit cache (per-channel keys, per-token values), its packing, and
decode over it under the interpreter."""

from __future__ import annotations

import torch

from kernels.gqa_decode import task as GT
from kernels.kivi_decode import kernel as K
from kernels.kivi_decode import task as T

CLAIM = "kivi-4bit-kv-decode-vs-bf16"


def test_codes_round_trip_through_the_packing():
    codes = torch.randint(0, 16, (2, 3, 5, 128), dtype=torch.uint8)
    words = K._pack(codes)
    assert words.dtype == torch.int32 and words.shape == (2, 3, 5, 16)
    shifts = torch.arange(8) * 4
    back = ((words.to(torch.int64)[..., None] >> shifts) & 0xF).reshape(codes.shape)
    assert torch.equal(back.to(torch.uint8), codes)


def test_keys_are_quantized_per_channel_and_values_per_token():
    """A key channel 100x larger than the rest keeps its own scale; the others keep theirs."""
    q, k, v = GT.make_inputs(seed=6, device="cpu", dtype="float32", batch=1, q_heads=2, kv_heads=1,
                             seqlen=130, head_dim=128)
    k[..., 7] *= 100
    kcode, ks, kz, vcode, vs, vz = T.quantize_kv(k, v)
    assert ks.shape == (1, 1, 3, 128) and vs.shape == (1, 1, 130)
    assert float(ks[..., 7].float().min()) > 20 * float(ks[..., :7].float().max())
    kd, vd = T.dequantized(kcode, ks, kz, vcode, vs, vz)
    err = (kd[..., :7] - k[..., :7].double()).abs().max()
    assert float(err) <= float(ks[..., :7].float().max()) / 2 + 1e-3   # half a step, outliers or not


def test_refuses_other_head_dims():
    q, k, v = GT.make_inputs(seed=6, device="cpu", dtype="float32", batch=1, q_heads=2, kv_heads=1,
                             seqlen=10, head_dim=64)
    try:
        K.quantize_cache(q, k, v)
    except ValueError as e:
        assert "head_dim 128" in str(e)
    else:
        raise AssertionError("head_dim 64 was accepted")


def test_reference_by_batch_rows_is_the_whole_cache_dequantized():
    """Quantizing a slice of batch rows gives that slice of the whole cache's codes, so the
    reference's steps of one row give the whole dequantized cache's attention."""
    q, k, v = GT.make_inputs(seed=2, device="cpu", dtype="float32", batch=3, q_heads=4, kv_heads=2,
                             seqlen=130, head_dim=128)
    kd, vd = T.dequantized(*T.quantize_kv(k, v))
    whole = GT.grouped_decode_fp64(q, kd, vd, chunk_bytes=1 << 40)
    one_row = GT.grouped_decode_fp64(q, k, v, chunk_bytes=1,
                                     cache64=lambda kb, vb: T.dequantized(*T.quantize_kv(kb, vb)))
    torch.testing.assert_close(one_row, whole, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(T.reference_fp64(q, k, v), whole, rtol=1e-12, atol=1e-12)
