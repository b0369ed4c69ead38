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
    if not _all_finite(r):
        rfin = np.isfinite(r)
        bad_kind = int(np.count_nonzero(~rfin & ~_same_nonfinite(o, r)))
        if bad_kind:
            return {**res, "passed": False, "reason": f"{bad_kind} elements differ where the reference is NaN or Inf"}
        o, r = o[rfin], r[rfin]
    if not _all_finite(o):
        nonfinite = int(np.count_nonzero(~np.isfinite(o)))
        return {**res, "passed": False, "nonfinite": nonfinite,
                "reason": f"{nonfinite} NaN/Inf values where the reference is finite"}
    scale = max(abs(float(r.max())), abs(float(r.min()))) if r.size else 0.0
    rnorm, err, max_abs, worst, viol, any_out = _one_pass(o, r, corr, scale=scale)
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
    res["worst_elem_ratio"] = worst if math.isfinite(worst) else 1e300
    if l2_fails:
        return {**res, "passed": False, "reason": l2_reason}
    if viol:
        return {**res, "passed": False, "reason": f"{viol} elements outside atol*max|ref| + rtol*|ref|"}
    return {**res, "passed": True, "reason": ""}


def _all_finite(x: np.ndarray) -> bool:
    """No NaN or infinity, from two reductions (a NaN propagates through both): no temporary the
    size of the array, which at 2^28 elements is 256 MiB of booleans."""
    return not x.size or (math.isfinite(float(x.max())) and math.isfinite(float(x.min())))


def _one_pass(o: np.ndarray, r: np.ndarray, corr, *, scale: float) -> tuple[float, float, float, float, int, bool]:
    """(||r||, ||o - r||, max |o - r|, the worst |err| / bound, elements outside the bound, any
    nonzero output) in one blocked pass with two block-sized temporaries: the comparison of one
    trial at 2^28 elements took 19 s as several passes (issue 23)."""
    rnorm = err = max_abs = worst = 0.0
    viol, any_out = 0, False
    atol_s = corr.atol * scale if corr.method == "allclose" else 0.0  # "exact" states no atol
    for a in range(0, r.size, BLOCK):
        ob, rb = o[a:a + BLOCK], r[a:a + BLOCK]
        d = ob - rb
        rnorm, err = math.hypot(rnorm, l2_norm(rb)), math.hypot(err, l2_norm(d))
        any_out = any_out or bool(np.count_nonzero(ob))
        np.abs(d, out=d)
        max_abs = max(max_abs, float(d.max()))
        if corr.method == "allclose":
            bound = np.abs(rb)
            bound *= corr.rtol
            bound += atol_s
            viol += int(np.count_nonzero(d > bound))
            np.maximum(bound, 1e-300, out=bound)
            np.divide(d, bound, out=d)
            worst = max(worst, float(d.max()))
    return rnorm, err, max_abs, worst, viol, any_out


def _same_nonfinite(o: np.ndarray, r: np.ndarray) -> np.ndarray:
    return (np.isnan(o) & np.isnan(r)) | (np.isinf(o) & np.isinf(r) & (np.sign(o) == np.sign(r)))


def l2_norm(x: np.ndarray) -> float:
    """L2 norm; finite values too large to square are scaled first instead of overflowing.

    `einsum`'s own loop, not `np.dot`: BLAS would start its own threads, which on a busy 2-core
    machine cost a hundred times the arithmetic; and no squared temporary."""
    if not x.size:
        return 0.0
    x = x.reshape(-1)
    with np.errstate(over="ignore"):
        v = math.sqrt(float(np.einsum("i,i->", x, x)))
    if math.isinf(v):
        m = float(np.max(np.abs(x)))
        y = x / m
        v = m * math.sqrt(float(np.einsum("i,i->", y, y)))
    return v


def bitwise_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Same shape and the same bits (NaN equals NaN, -0.0 differs from 0.0)."""
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()
