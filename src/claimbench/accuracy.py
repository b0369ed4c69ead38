"""How far one output is from its float64 reference: the numbers every correctness check rests on.

Comparisons run in float64 on CPU, on plain tensors, so a tensor subclass cannot lie to them and
a device cannot round them. They run over blocks that stay in cache: a full-size output is tens
of megabytes in float64, and a dozen whole-tensor passes over it cost a tenth of a second per
check, several times over per claim. The answer is the same as a whole-tensor computation (the
L2 norms are combined from per-block norms, so their last bits may differ).
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

BLOCK = 1 << 15  # float64 elements per block: a few of them fit in a core's L2


def compare(out: torch.Tensor, ref: torch.Tensor, corr, expect_dtype: Optional[torch.dtype] = None,
            *, quick: bool = False) -> dict:
    """Accuracy of one output against its float64 reference, as plain data.

    ``quick`` stops at the first failed bound (null models need only pass or fail)."""
    res: dict[str, Any] = {"shape": list(out.shape), "dtype": str(out.dtype).replace("torch.", "")}
    if tuple(out.shape) != tuple(ref.shape):
        return {**res, "passed": False, "reason": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    if expect_dtype is not None and out.dtype != expect_dtype:
        return {**res, "passed": False, "reason": f"dtype {out.dtype} != baseline's {expect_dtype}"}
    o_all = torch.Tensor.detach(out).to("cpu").reshape(-1)
    r_all = torch.Tensor.detach(ref).to("cpu", torch.float64).reshape(-1)
    n = r_all.numel()
    blocks = [(a, min(a + BLOCK, n)) for a in range(0, n, BLOCK)]
    rnorm = err = max_abs = scale = 0.0
    nonfinite, any_out, partial_ref = 0, False, False
    for a, b in blocks:
        o, r = o_all[a:b].to(torch.float64, copy=True), r_all[a:b]
        d = torch.sub(o, r)
        rs, ds = _norm(r), _norm(d)
        if not (math.isfinite(rs) and math.isfinite(ds)):  # rare: find the non-finite values
            rfin = torch.isfinite(r)
            bad = ~torch.isfinite(o) & rfin
            nonfinite += int(bad.sum())
            if not bool(rfin.all()):
                partial_ref = True
                r = torch.where(rfin, r, torch.zeros_like(r))
                o = torch.where(rfin, o, torch.zeros_like(o))
                d = torch.where(bad, torch.zeros_like(d), torch.sub(o, r))
            rs, ds = _norm(r), _norm(torch.where(torch.isfinite(d), d, torch.zeros_like(d)))
        rnorm, err = math.hypot(rnorm, rs), math.hypot(err, ds)  # overflow-safe sum of squares
        any_out = any_out or bool(o.any())
        max_abs = max(max_abs, float(d.abs().max()) if b > a else 0.0)
        scale = max(scale, float(r.abs().max()) if b > a else 0.0)
    if nonfinite:
        return {**res, "passed": False, "nonfinite": nonfinite,
                "reason": f"{nonfinite} NaN/Inf values where the reference is finite"}
    rel_l2 = err / rnorm if rnorm > 0 else err
    res.update(rel_l2=rel_l2, max_abs_err=max_abs)
    if rnorm > 0 and n and not any_out:
        return {**res, "passed": False, "reason": "output is all zeros against a nonzero reference"}
    if corr.method == "exact":
        ok = max_abs == 0.0
        return {**res, "passed": ok, "reason": "" if ok else f"not exact: max |err| {max_abs:.3g}"}
    l2_fails = not rel_l2 <= corr.max_rel_l2  # NaN fails
    if quick and l2_fails:
        return {**res, "passed": False, "reason": f"rel L2 error {rel_l2:.3g} > max_rel_l2 {corr.max_rel_l2:g}"}
    viol, worst = _elementwise(o_all, r_all, blocks, corr, scale, partial_ref)
    res["worst_elem_ratio"] = worst if math.isfinite(worst) else 1e300
    if l2_fails:
        return {**res, "passed": False, "reason": f"rel L2 error {rel_l2:.3g} > max_rel_l2 {corr.max_rel_l2:g}"}
    if viol:
        return {**res, "passed": False, "reason": f"{viol} elements outside atol*max|ref| + rtol*|ref|"}
    return {**res, "passed": True, "reason": ""}


def _norm(t: torch.Tensor) -> float:
    """L2 norm; finite values too large to square are scaled first instead of overflowing."""
    if not t.numel():
        return 0.0
    v = float(torch.linalg.vector_norm(t))
    if math.isinf(v) and bool(torch.isfinite(t).all()):
        m = float(t.abs().max())
        v = m * float(torch.linalg.vector_norm(t / m))
    return v


def _elementwise(o_all, r_all, blocks, corr, scale: float, partial_ref: bool) -> tuple[int, float]:
    """(elements outside atol*max|ref| + rtol*|ref|, the worst |err| / bound)."""
    viol, worst = 0, 0.0
    for a, b in blocks:
        o, r = o_all[a:b].to(torch.float64, copy=True), r_all[a:b]
        if partial_ref:  # compare only where the reference is finite
            rfin = torch.isfinite(r)
            r = torch.where(rfin, r, torch.zeros_like(r))
            o = torch.where(rfin, o, torch.zeros_like(o))
        d = o.sub_(r).abs_()
        bound = r.abs().mul_(corr.rtol).add_(corr.atol * scale)
        viol += int((d > bound).sum())
        worst = max(worst, float(d.div_(bound.clamp_min_(1e-300)).max()) if b > a else 0.0)
    return viol, worst
