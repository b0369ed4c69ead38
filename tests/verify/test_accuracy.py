"""The blocked numpy comparison must say what a plain whole-array computation says."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from claimbench.spec.claim import Correctness
from claimbench.verify import accuracy


def corr(method="allclose", max_rel_l2=1e-3, rtol=1e-3, atol=1e-4):
    return SimpleNamespace(method=method, max_rel_l2=max_rel_l2, rtol=rtol, atol=atol)


def plain(o, r, c):
    """The definition, one pass per quantity over the whole array (finite reference)."""
    o, r = np.asarray(o, np.float64).reshape(-1), np.asarray(r, np.float64).reshape(-1)
    bad = ~np.isfinite(o)
    if bad.any():
        return {"passed": False, "nonfinite": int(bad.sum())}
    m = float(np.abs(r).max()) if r.size else 0.0
    m = m if m > 0 else 1.0
    rnorm, err = m * float(np.linalg.norm(r / m)), m * float(np.linalg.norm((o - r) / m))
    rel = err / rnorm if rnorm > 0 else err
    d = np.abs(o - r)
    out = {"rel_l2": rel, "max_abs_err": float(d.max())}
    if rnorm > 0 and not o.any():
        return {**out, "passed": False}
    if c.method == "exact":
        return {**out, "passed": out["max_abs_err"] == 0.0}
    bound = np.abs(r) * c.rtol + c.atol * float(np.abs(r).max())
    viol = int((d > bound).sum())
    return {**out, "worst_elem_ratio": float((d / np.maximum(bound, 1e-300)).max()),
            "passed": rel <= c.max_rel_l2 and not viol}


def cases():
    g = np.random.default_rng(0)
    n = accuracy.BLOCK * 2 + 77  # straddles blocks
    ref = g.standard_normal(n)
    yield "close", ref.astype(np.float32).astype(np.float64), ref, corr()
    yield "fp16 too coarse", ref.astype(np.float16).astype(np.float64), ref, corr(max_rel_l2=1e-5, rtol=1e-5, atol=1e-6)
    yield "some elements off", ref + 1e-3 * g.standard_normal(n), ref, corr(max_rel_l2=1e-2, rtol=1e-4, atol=1e-5)
    yield "zeros", np.zeros(n), ref, corr(max_rel_l2=10.0, rtol=10.0, atol=10.0)
    nan_out = ref.copy()
    nan_out[accuracy.BLOCK + 3] = np.nan
    yield "NaN where the reference is finite", nan_out, ref, corr()
    huge = ref * 1e200
    yield "huge but finite", huge * (1 + 1e-9), huge, corr()
    yield "huge and wrong", huge * 2, huge, corr()
    yield "exact", ref.copy(), ref, corr("exact")
    yield "exact off by one ulp", np.nextafter(ref, ref + 1), ref, corr("exact")
    yield "empty", np.zeros(0), np.zeros(0), corr()


@pytest.mark.parametrize("name,out,ref,c", list(cases()), ids=[c[0] for c in cases()])
def test_blocked_compare_agrees_with_the_plain_definition(name, out, ref, c):
    got = accuracy.compare(out, ref, c)
    want = plain(out, ref, c) if out.size else {"passed": True}
    assert got["passed"] == want["passed"], (got, want)
    for key in ("nonfinite", "max_abs_err", "worst_elem_ratio"):
        if key in want:
            assert got[key] == want[key], key
    if "rel_l2" in want:
        assert math.isclose(got["rel_l2"], want["rel_l2"], rel_tol=1e-12, abs_tol=1e-300)


def test_a_non_finite_reference_element_must_be_matched_in_kind():
    ref = np.array([1.0, np.inf, -np.inf, np.nan, 2.0])
    assert accuracy.compare(ref.copy(), ref, corr())["passed"]
    for bad in (1e9, np.nan, -np.inf):
        out = ref.copy()
        out[1] = bad
        res = accuracy.compare(out, ref, corr())
        assert not res["passed"] and "NaN or Inf" in res["reason"], res


def test_quick_stops_at_the_l2_bound_with_the_same_verdict():
    ref = np.random.default_rng(1).standard_normal(1000)
    full = accuracy.compare(np.zeros(1000), ref, corr())
    quick = accuracy.compare(np.zeros(1000), ref, corr(), quick=True)
    assert not full["passed"] and not quick["passed"] and "worst_elem_ratio" not in quick


def test_shape_and_dtype_and_atol_scale():
    c = Correctness(method="allclose", reference="baseline-float64", max_rel_l2=1e-5, rtol=1e-5, atol=1e-6)
    ref = np.random.default_rng(2).standard_normal((8, 8))
    assert "shape" in accuracy.compare(np.zeros((8, 7)), ref, c)["reason"]
    assert "dtype" in accuracy.compare(ref, ref, c, out_dtype="float16", expect_dtype="float32")["reason"]
    tiny = np.full(100, 4e-6)  # softmax-sized outputs: atol is relative to max|ref|, so zeros fail
    res = accuracy.compare(np.zeros(100) + 1e-9, tiny, Correctness(method="allclose", reference="baseline-float64",
                                                                 max_rel_l2=1.0, rtol=0.0, atol=1e-3))
    assert not res["passed"]


def test_bitwise_equal_tells_negative_zero_apart():
    assert accuracy.bitwise_equal(np.array([1.5]), np.array([1.5]))
    assert not accuracy.bitwise_equal(np.array([0.0]), np.array([-0.0]))
    assert accuracy.bitwise_equal(np.array([np.nan]), np.array([np.nan]))


def test_exact_claims_state_no_tolerances_and_compare_needs_none():
    """An `exact` claim has no atol or rtol (None): the blocked pass must not touch them."""
    from types import SimpleNamespace

    import numpy as np

    corr = SimpleNamespace(method="exact", max_rel_l2=None, rtol=None, atol=None)
    ref = np.arange(100, dtype=np.float64).reshape(10, 10)
    assert accuracy.compare(ref.copy(), ref, corr)["passed"]
    off = ref.copy()
    off[3, 4] += 1
    got = accuracy.compare(off, ref, corr)
    assert not got["passed"] and got["reason"].startswith("not exact")
