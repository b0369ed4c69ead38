"""Null models: answers that mean nothing must fail the claim's tolerances, on every trial."""

import numpy as np

from claimbench.spec.claim import Correctness
from claimbench.verify import nullmodels


def corr(**kw):
    base = dict(method="allclose", reference="baseline-float64", max_rel_l2=1e-5, rtol=1e-5, atol=1e-6)
    base.update(kw)
    return Correctness(**base)


def test_null_models_flag_loose_tolerances():
    ref = [np.random.default_rng(0).standard_normal((16, 64))]
    loose = nullmodels.null_models(ref, corr(max_rel_l2=2.0, rtol=2.0, atol=2.0), "float32")
    assert loose["row_mean"] and loose["one_precision_lower"]
    assert not loose["zeros"]  # an all-zero output never passes against a nonzero reference
    assert not any(nullmodels.null_models(ref, corr(), "float32").values())
    # a bf16 claim: the lower model is fp8, which a 1.5e-2 tolerance does not admit
    bf = nullmodels.null_models(ref, corr(max_rel_l2=1.5e-2, rtol=1.5e-2, atol=1e-2), "bfloat16")
    assert not bf["one_precision_lower"]


def test_outputs_too_small_to_tell_give_no_verdict():
    assert nullmodels.null_models([np.array([0.7])], corr(max_rel_l2=0.1, rtol=0.1, atol=0.1), "bfloat16") == {}


def test_a_model_identical_to_the_reference_is_not_counted():
    ref = [np.ones((4, 16))]  # softmax of one element per row: exactly 1.0, representable in every precision
    got = nullmodels.null_models(ref, corr(), "float32")
    assert "one_precision_lower" not in got and "row_mean" not in got


def test_explain_names_models_in_words():
    assert "rounded to one precision lower" in nullmodels.explain(["one_precision_lower"])
