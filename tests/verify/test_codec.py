"""Decoding bytes in numpy must agree with torch bit for bit, for every dtype a claim may use."""

import numpy as np
import pytest
import torch

from claimbench.verify import codec

DTYPES = ["float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int64", "int32", "int8",
          "uint8", "bool"]


@pytest.mark.parametrize("name", DTYPES)
def test_from_bytes_matches_torch(name):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(257, generator=g, dtype=torch.float64) * 50
    t = x.to(getattr(torch, name)) if name != "bool" else x > 0
    raw = t.contiguous().view(torch.uint8).numpy().tobytes() if name != "bool" else t.numpy().tobytes()
    got = codec.from_bytes(raw, name, [257])
    want = t.to(torch.float64).numpy() if t.is_floating_point() else t.numpy()
    assert np.array_equal(got, want, equal_nan=True)


def test_strided_views_are_read_through_their_strides():
    t = torch.arange(24, dtype=torch.float32).reshape(4, 6).t()  # a transposed view
    raw = t.untyped_storage()
    data = bytes(raw)
    got = codec.from_bytes(data, "float32", list(t.shape), strides=list(t.stride()))
    assert np.array_equal(got, t.numpy().astype(np.float64))
    assert codec.span_bytes("float32", list(t.shape), list(t.stride())) == 24 * 4


@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2", "float32"])
def test_round_to_matches_torch_casts(name):
    x = torch.randn(4096, dtype=torch.float64) * 10
    got = codec.round_to(x.numpy(), name)
    want = x.to(getattr(torch, name)).to(torch.float64).numpy()
    assert np.array_equal(got, want, equal_nan=True)


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float16"])
def test_values_next_to_a_midpoint_round_as_torch_does(name):
    """CI, 2026-12-02: one random float64 in 4,096 lay within a float32 ulp of an e5m2 midpoint,
    where torch (which casts through float32) and a direct rounding part ways (-45055.99999999999:
    -49152 against -40960). Every midpoint of the format and its two float64 neighbours."""
    if name == "float16":
        v = torch.arange(-65504, 65504, 0.25, dtype=torch.float64).to(torch.float16).unique().to(torch.float64).numpy()
    else:
        v = torch.arange(256, dtype=torch.int32).to(torch.uint8).view(getattr(torch, name)).to(torch.float64).numpy()
    v = np.sort(v[np.isfinite(v)])
    mids = (v[1:] + v[:-1]) / 2
    xs = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    want = torch.from_numpy(xs).to(getattr(torch, name)).to(torch.float64).numpy()
    assert np.array_equal(codec.round_to(xs, name), want, equal_nan=True)


def test_encode_element_round_trips():
    for name in ("float32", "float16", "bfloat16", "float8_e4m3fn"):
        raw = codec.encode_element(-2.5, name)
        assert codec.from_bytes(raw, name, [1])[0] == -2.5


def test_too_few_bytes_and_unknown_dtypes_are_refused():
    with pytest.raises(codec.CodecError):
        codec.from_bytes(b"\0" * 3, "float32", [1])
    with pytest.raises(codec.CodecError):
        codec.from_bytes(b"\0" * 8, "complex64", [1])
