"""kernels/softmax/ in the Triton interpreter, at the claims' check shapes and tolerances."""

from __future__ import annotations

import torch
from kernel_claims import assert_seeds_differ

from kernels.softmax import kernel as S
from kernels.softmax import task as ST

CLAIMS = ["softmax-online-vs-torch", "softmax-online-vs-three-pass"]


def test_seeds_give_different_inputs():
    assert_seeds_differ(CLAIMS[0])


def test_online_rescaling_when_the_maximum_moves():
    """Rows whose maximum arrives in the last chunk, the first chunk, or never changes, and a
    spread of 2000 that overflows exp without the max shift. BLOCK is 64 in the interpreter."""
    cols = 200
    x = torch.stack([
        torch.linspace(-30, 30, cols),
        torch.linspace(30, -30, cols),
        torch.full((cols,), 7.0),
        torch.linspace(-1000, 1000, cols),
    ])
    ref = ST.reference_fp64(x)
    for fn in (S.online_softmax, ST.three_pass_softmax):
        out = fn(x).double()
        assert torch.allclose(out, ref, rtol=1e-5, atol=1e-7), fn.__name__
        assert torch.allclose(out.sum(dim=-1), torch.ones(4, dtype=torch.float64), atol=1e-5)
