"""verify: accuracy, null models, poisoning, aliasing, subclass refusal."""

import pytest
import torch

from claimbench import verify
from claimbench.claim import Correctness


def corr(**kw):
    base = dict(method="allclose", reference="baseline-float64", max_rel_l2=1e-5, rtol=1e-5, atol=1e-6)
    base.update(kw)
    return Correctness(**base)


def test_accuracy_passes_and_fails_on_relative_l2():
    ref = torch.randn(50, 30, dtype=torch.float64)
    assert verify.compare(ref.float(), ref, corr())["passed"]
    bad = verify.compare(ref.bfloat16().float(), ref, corr())
    assert not bad["passed"] and "rel L2" in bad["reason"]


def test_nan_zero_shape_and_dtype_failures():
    ref = torch.randn(8, 8, dtype=torch.float64)
    out = ref.float().clone()
    out[0, 0] = float("nan")
    assert "NaN" in verify.compare(out, ref, corr())["reason"]
    z = verify.compare(torch.zeros(8, 8), ref, corr(max_rel_l2=10.0, rtol=10.0, atol=10.0))
    assert not z["passed"] and "zeros" in z["reason"]
    assert "shape" in verify.compare(torch.zeros(8, 7), ref, corr())["reason"]
    assert "dtype" in verify.compare(ref.half(), ref, corr(), torch.float32)["reason"]


def test_atol_is_relative_to_the_reference_scale():
    ref = torch.full((100,), 4e-6, dtype=torch.float64)  # softmax-sized outputs
    res = verify.compare(torch.zeros(100) + 1e-9, ref, corr(max_rel_l2=1.0, rtol=0.0, atol=1e-3))
    assert not res["passed"]


def test_null_models_flag_loose_tolerances():
    ref = (torch.randn(16, 64, dtype=torch.float64),)
    loose = verify.null_models(ref, corr(max_rel_l2=2.0, rtol=2.0, atol=2.0), (torch.float32,), "float32")
    assert loose["row_mean"] and loose["one_precision_lower"]
    assert not loose["zeros"]  # an all-zero output never passes against a nonzero reference
    tight = verify.null_models(ref, corr(), (torch.float32,), "float32")
    assert not any(tight.values())
    # a bf16 claim checked at float32 on CPU: the lower model is fp8, not fp16
    bf = verify.null_models(ref, corr(max_rel_l2=1.5e-2, rtol=1.5e-2, atol=1e-2), (torch.float32,), "bfloat16")
    assert not bf["one_precision_lower"]


def test_subclass_outputs_are_refused():
    class Liar(torch.Tensor):
        pass

    with pytest.raises(verify.NotATensor):
        verify.outputs(torch.zeros(3).as_subclass(Liar))
    assert len(verify.outputs((torch.zeros(1), torch.ones(2)))) == 2


def test_poison_fills_floats_with_nan_and_ints_with_a_sentinel():
    f, i = torch.ones(4), torch.ones(4, dtype=torch.int32)
    verify.poison((f, [i]))
    assert torch.isnan(f).all() and (i == torch.iinfo(torch.int32).min).all()


def test_aliasing_and_bitwise_helpers():
    x = torch.randn(10)
    assert verify.aliases((x[2:5],), (x,))
    assert not verify.aliases((x.clone(),), (x,))
    assert verify.bitwise_equal(torch.tensor(1.5), torch.tensor(1.5))  # 0-dim
    assert not verify.bitwise_equal(torch.tensor([0.0]), torch.tensor([-0.0]))
