"""The blocked comparison must say what a plain whole-tensor computation says."""

import math
from types import SimpleNamespace

import pytest
import torch

from claimbench import accuracy


def corr(method="allclose", max_rel_l2=1e-3, rtol=1e-3, atol=1e-4):
    return SimpleNamespace(method=method, max_rel_l2=max_rel_l2, rtol=rtol, atol=atol)


def plain(out, ref, c):
    """The definition, one pass per quantity over the whole tensor."""
    o, r = out.detach().to(torch.float64).reshape(-1).clone(), ref.to(torch.float64).reshape(-1).clone()
    rfin = torch.isfinite(r)
    bad = ~torch.isfinite(o) & rfin
    if bad.any():
        return {"passed": False, "nonfinite": int(bad.sum())}
    o, r = torch.where(rfin, o, 0.0), torch.where(rfin, r, 0.0)
    m = float(r.abs().max()) if r.numel() else 0.0
    m = m if m > 0 else 1.0
    rnorm, err = m * float((r / m).norm()), m * float(((o - r) / m).norm())  # scaled: no overflow
    rel = err / rnorm if rnorm > 0 else err
    d = (o - r).abs()
    out_d = {"rel_l2": rel, "max_abs_err": float(d.max())}
    if rnorm > 0 and not o.any():
        return {**out_d, "passed": False}
    if c.method == "exact":
        return {**out_d, "passed": out_d["max_abs_err"] == 0.0}
    bound = r.abs() * c.rtol + c.atol * float(r.abs().max())
    viol = int((d > bound).sum())
    worst = float((d / bound.clamp_min(1e-300)).max())
    return {**out_d, "worst_elem_ratio": worst, "passed": rel <= c.max_rel_l2 and not viol}


def cases():
    g = torch.Generator().manual_seed(0)
    n = accuracy.BLOCK * 2 + 77  # straddles blocks
    ref = torch.randn(n, generator=g, dtype=torch.float64)
    yield "close", ref.float(), ref, corr()
    yield "bf16 too coarse", ref.bfloat16(), ref, corr()
    noisy = ref + 1e-3 * torch.randn(n, generator=g, dtype=torch.float64)
    yield "some elements off", noisy, ref, corr(max_rel_l2=1e-2, rtol=1e-4, atol=1e-5)
    yield "zeros", torch.zeros(n), ref, corr(max_rel_l2=10.0, rtol=10.0, atol=10.0)
    nan_out = ref.clone()
    nan_out[accuracy.BLOCK + 3] = float("nan")
    yield "NaN where the reference is finite", nan_out, ref, corr()
    ref_inf = ref.clone()
    ref_inf[5] = float("inf")
    out_inf = ref_inf.clone()
    out_inf[5] = float("nan")
    yield "reference not finite there", out_inf, ref_inf, corr()
    huge = ref * 1e200
    yield "huge but finite", huge * (1 + 1e-9), huge, corr()
    yield "huge and wrong", huge * 2, huge, corr()
    yield "exact", ref.clone(), ref, corr("exact")
    yield "exact off by one ulp", torch.nextafter(ref, ref + 1), ref, corr("exact")
    yield "empty", torch.zeros(0), torch.zeros(0, dtype=torch.float64), corr()


@pytest.mark.parametrize("name,out,ref,c", list(cases()), ids=[c[0] for c in cases()])
def test_blocked_compare_agrees_with_the_plain_definition(name, out, ref, c):
    got = accuracy.compare(out, ref, c)
    want = plain(out, ref, c) if out.numel() else {"passed": True}
    assert got["passed"] == want["passed"], (got, want)
    for key in ("nonfinite", "max_abs_err", "worst_elem_ratio"):
        if key in want:
            assert got[key] == want[key], key
    if "rel_l2" in want:
        assert math.isclose(got["rel_l2"], want["rel_l2"], rel_tol=1e-12, abs_tol=1e-300)


def test_quick_stops_at_the_l2_bound_with_the_same_verdict():
    ref = torch.randn(1000, dtype=torch.float64)
    full = accuracy.compare(torch.zeros(1000), ref, corr())
    quick = accuracy.compare(torch.zeros(1000), ref, corr(), quick=True)
    assert not full["passed"] and not quick["passed"] and "worst_elem_ratio" not in quick
