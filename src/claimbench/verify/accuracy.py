"""How far one output is from its float64 reference: the numbers every correctness check rests on.

Both sides arrive as numpy arrays the orchestrator decoded from bytes it read itself. The L2
norms are computed over cache-sized blocks and combined overflow-safely; NaN never passes (a
NaN rel-L2 fails its bound), and a non-finite reference element must be matched in kind.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import numpy as np

BLOCK = 1 << 15  # float64 elements per block: a few fit in a core's L2


def compare(out: np.ndarray, ref: np.ndarray, corr, *, out_dtype: str = "", expect_dtype: Optional[str] = None,
            quick: bool = False) -> dict:
    """Accuracy of one output against its float64 reference, as plain data.

    ``quick`` stops at the first failed bound (null models need only pass or fail)."""
    res: dict[str, Any] = {"shape": list(out.shape), "dtype": out_dtype}
    if tuple(out.shape) != tuple(ref.shape):
        return {**res, "passed": False, "reason": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    if expect_dtype is not None and out_dtype != expect_dtype:
        return {**res, "passed": False, "reason": f"dtype {out_dtype} != the baseline's {expect_dtype}"}
    o = np.asarray(out, dtype=np.float64).reshape(-1)
    r = np.asarray(ref, dtype=np.float64).reshape(-1)
    rfin = np.isfinite(r)
    partial = not bool(rfin.all())
    if partial:
        bad_kind = int(np.count_nonzero(~rfin & ~_same_nonfinite(o, r)))
        if bad_kind:
            return {**res, "passed": False, "reason": f"{bad_kind} elements differ where the reference is NaN or Inf"}
        o, r = o[rfin], r[rfin]
    nonfinite = int(np.count_nonzero(~np.isfinite(o)))
    if nonfinite:
        return {**res, "passed": False, "nonfinite": nonfinite,
                "reason": f"{nonfinite} NaN/Inf values where the reference is finite"}
    rnorm, err, max_abs, scale, any_out = 0.0, 0.0, 0.0, 0.0, False
    for a in range(0, r.size, BLOCK):
        ob, rb = o[a:a + BLOCK], r[a:a + BLOCK]
        d = ob - rb
        rnorm, err = math.hypot(rnorm, _norm(rb)), math.hypot(err, _norm(d))
        any_out = any_out or bool(np.any(ob))
        max_abs = max(max_abs, float(np.max(np.abs(d))))
        scale = max(scale, float(np.max(np.abs(rb))))
    rel_l2 = err / rnorm if rnorm > 0 else err
    res.update(rel_l2=rel_l2, max_abs_err=max_abs)
    if rnorm > 0 and r.size and not any_out:
        return {**res, "passed": False, "reason": "output is all zeros against a nonzero reference"}
    if corr.method == "exact":
        ok = max_abs == 0.0
        return {**res, "passed": ok, "reason": "" if ok else f"not exact: max |err| {max_abs:.3g}"}
    l2_fails = not rel_l2 <= corr.max_rel_l2  # NaN fails
    l2_reason = f"relative L2 error {rel_l2:.3g} is above max_rel_l2 {corr.max_rel_l2:g}"
    if quick and l2_fails:
        return {**res, "passed": False, "reason": l2_reason}
    viol, worst = _elementwise(o, r, corr, scale)
    res["worst_elem_ratio"] = worst if math.isfinite(worst) else 1e300
    if l2_fails:
        return {**res, "passed": False, "reason": l2_reason}
    if viol:
        return {**res, "passed": False, "reason": f"{viol} elements outside atol*max|ref| + rtol*|ref|"}
    return {**res, "passed": True, "reason": ""}


def _same_nonfinite(o: np.ndarray, r: np.ndarray) -> np.ndarray:
    return (np.isnan(o) & np.isnan(r)) | (np.isinf(o) & np.isinf(r) & (np.sign(o) == np.sign(r)))


def _norm(x: np.ndarray) -> float:
    """L2 norm; finite values too large to square are scaled first instead of overflowing.

    A plain reduction, not `np.dot`: BLAS would start its own threads, which on a busy 2-core
    machine cost a hundred times the arithmetic."""
    if not x.size:
        return 0.0
    with np.errstate(over="ignore"):
        v = math.sqrt(float(np.add.reduce(x * x)))
    if math.isinf(v):
        m = float(np.max(np.abs(x)))
        y = x / m
        v = m * math.sqrt(float(np.add.reduce(y * y)))
    return v


def _elementwise(o: np.ndarray, r: np.ndarray, corr, scale: float) -> tuple[int, float]:
    """(elements outside atol*max|ref| + rtol*|ref|, the worst |err| / bound)."""
    viol, worst = 0, 0.0
    for a in range(0, r.size, BLOCK):
        d = np.abs(o[a:a + BLOCK] - r[a:a + BLOCK])
        bound = np.abs(r[a:a + BLOCK]) * corr.rtol + corr.atol * scale
        viol += int(np.count_nonzero(d > bound))
        worst = max(worst, float(np.max(d / np.maximum(bound, 1e-300))))
    return viol, worst


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape and the same bits (NaN equals NaN, -0.0 differs from 0.0)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
