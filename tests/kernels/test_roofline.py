"""kernels/roofline/ in the Triton interpreter, at the claims' check shapes."""

from __future__ import annotations

import pytest
import torch
from kernel_claims import assert_seeds_differ

from kernels.roofline import kernel as R

CLAIMS = ["roofline-copy-gbps", "roofline-gemm-tflops"]


@pytest.mark.parametrize("claim_id", CLAIMS)
def test_seeds_give_different_inputs(claim_id):
    assert_seeds_differ(claim_id)


@pytest.mark.parametrize("dtype", [torch.float16, torch.int32, torch.uint8])
def test_copy_is_bitwise_for_any_dtype(dtype):
    """The copy moves bytes, so it must be exact whatever they hold (NaN payloads included)."""
    bits = torch.randint(0, 256, (4099 * 4,), dtype=torch.uint8, generator=torch.Generator().manual_seed(15))
    x = bits.view(dtype)
    y = R.triton_copy(x)
    assert y.data_ptr() != x.data_ptr()
    assert torch.equal(y.view(torch.uint8), bits)
