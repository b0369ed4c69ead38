"""Verify: is this output the right answer? Accuracy, null models, properties, poisoning.

Comparisons run in float64 on CPU copies, so a tensor subclass cannot lie to them and a device
cannot round them. Every check returns data; nothing here raises on a wrong answer.
"""

from __future__ import annotations

import math
from typing import Any, Optional

import torch

LOWER = {
    torch.float64: torch.float32, torch.float32: torch.float16, torch.float16: torch.bfloat16,
    torch.bfloat16: getattr(torch, "float8_e4m3fn", torch.bfloat16),
}
# one precision below the claim's own precision (not the CPU check's): the tolerances are the claim's
LOWER_BY_NAME = {"float64": torch.float32, "float32": torch.float16, "tf32": torch.bfloat16,
                 "float16": torch.bfloat16, "bfloat16": getattr(torch, "float8_e4m3fn", None),
                 "float8_e4m3fn": getattr(torch, "float8_e5m2", None)}


class NotATensor(Exception):
    pass


def outputs(value: Any) -> tuple[torch.Tensor, ...]:
    """Normalize a return value to a tuple of plain tensors; subclasses are refused."""
    items = value if isinstance(value, (tuple, list)) else (value,)
    out = []
    for i, t in enumerate(items):
        if type(t) is not torch.Tensor:
            raise NotATensor(f"output {i} is a {type(t).__module__}.{type(t).__name__}, not a plain torch.Tensor")
        out.append(t)
    return tuple(out)


def _f64(t: torch.Tensor) -> torch.Tensor:
    return torch.Tensor.detach(t).to("cpu", copy=True).to(torch.float64)


def compare(out: torch.Tensor, ref: torch.Tensor, corr, expect_dtype: Optional[torch.dtype] = None) -> dict:
    """Accuracy of one output against its float64 reference, as plain data."""
    res: dict[str, Any] = {"shape": list(out.shape), "dtype": str(out.dtype).replace("torch.", "")}
    if tuple(out.shape) != tuple(ref.shape):
        return {**res, "passed": False, "reason": f"shape {tuple(out.shape)} != reference {tuple(ref.shape)}"}
    if expect_dtype is not None and out.dtype != expect_dtype:
        return {**res, "passed": False, "reason": f"dtype {out.dtype} != baseline's {expect_dtype}"}
    o, r = _f64(out), _f64(ref)
    ref_finite = torch.isfinite(r)
    all_finite = bool(ref_finite.all())
    bad = ~torch.isfinite(o) if all_finite else (~torch.isfinite(o)) & ref_finite
    if bool(bad.any()):
        return {**res, "passed": False, "nonfinite": int(bad.sum()), "reason": f"{int(bad.sum())} NaN/Inf values where the reference is finite"}
    if not all_finite:  # compare only where the reference is finite
        o = torch.where(ref_finite, o, torch.zeros_like(o))
        r = torch.where(ref_finite, r, torch.zeros_like(r))
    n = r.numel()
    rnorm = float(torch.linalg.vector_norm(r)) if n else 0.0
    diff = torch.sub(o, r)
    err = float(torch.linalg.vector_norm(diff)) if n else 0.0
    rel_l2 = err / rnorm if rnorm > 0 else err
    diff.abs_()
    max_abs = float(diff.max()) if n else 0.0
    res.update(rel_l2=rel_l2, max_abs_err=max_abs)
    if rnorm > 0 and n and not bool(o.any()):
        return {**res, "passed": False, "reason": "output is all zeros against a nonzero reference"}
    if corr.method == "exact":
        ok = max_abs == 0.0
        return {**res, "passed": ok, "reason": "" if ok else f"not exact: max |err| {max_abs:.3g}"}
    absr = r.abs_()  # r's sign is no longer needed: diff and o were taken above
    scale = float(absr.max()) if n else 0.0
    bound = absr.mul_(corr.rtol).add_(corr.atol * scale)
    viol = int((diff > bound).sum()) if n else 0
    worst = float(diff.div_(bound.clamp_min_(1e-300)).max()) if n else 0.0
    res["worst_elem_ratio"] = worst if math.isfinite(worst) else 1e300
    if rel_l2 > corr.max_rel_l2:
        return {**res, "passed": False, "reason": f"rel L2 error {rel_l2:.3g} > max_rel_l2 {corr.max_rel_l2:g}"}
    if viol:
        return {**res, "passed": False, "reason": f"{viol} elements outside atol*max|ref| + rtol*|ref|"}
    return {**res, "passed": True, "reason": ""}


def compare_all(outs, refs, corr, expect=None) -> dict:
    if len(outs) != len(refs):
        return {"passed": False, "reason": f"{len(outs)} outputs, reference has {len(refs)}", "outputs": []}
    rows = [compare(o, r, corr, None if expect is None else expect[i]) for i, (o, r) in enumerate(zip(outs, refs))]
    bad = [f"output {i}: {row['reason']}" for i, row in enumerate(rows) if not row["passed"]]
    return {"passed": not bad, "reason": "; ".join(bad), "outputs": rows}


def null_models(refs, corr, out_dtypes, claim_dtype: str | None = None) -> dict:
    """Answers that mean nothing; if one passes the claim's bounds, the bounds mean nothing.

    The lower-precision model rounds the reference one step below the claim's precision (for
    integer/quantized claims, below the output's dtype)."""
    verdicts = {}
    models = {"zeros": [torch.zeros_like(r) for r in refs]}
    if all(r.dim() >= 1 and r.shape[-1] > 1 for r in refs):
        models["row_mean"] = [r.mean(dim=-1, keepdim=True).expand_as(r).clone() for r in refs]
    if claim_dtype == "skip":
        lower = [None for _ in out_dtypes]
    elif claim_dtype in LOWER_BY_NAME:
        lower = [LOWER_BY_NAME[claim_dtype] for _ in out_dtypes]
    else:
        lower = [LOWER.get(d) for d in out_dtypes]
    if corr.method == "allclose" and all(lo is not None and d.is_floating_point for lo, d in zip(lower, out_dtypes)):
        models["one_precision_lower"] = [r.to(lo).to(torch.float64) for r, lo in zip(refs, lower)]
    for name, vals in models.items():
        res = compare_all(vals, refs, corr)
        verdicts[name] = bool(res["passed"])
    return verdicts


def poison(*tensors: Any) -> None:
    """Overwrite before freeing, so memory handed out again holds no answer."""
    for t in tensors:
        if isinstance(t, (tuple, list)):
            poison(*t)
        elif isinstance(t, torch.Tensor) and t.numel():
            with torch.no_grad():
                if t.is_floating_point() or t.is_complex():
                    torch.Tensor.fill_(t, float("nan"))
                elif t.dtype != torch.bool:
                    torch.Tensor.fill_(t, torch.iinfo(t.dtype).min if t.dtype.is_signed else torch.iinfo(t.dtype).max)


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    return bool(torch.equal(a.detach().reshape(-1).contiguous().view(torch.uint8),
                            b.detach().reshape(-1).contiguous().view(torch.uint8)))


def clone_all(items) -> tuple:
    return tuple(torch.Tensor.clone(t) if isinstance(t, torch.Tensor) else t for t in items)


def same_contents(a, b) -> bool:
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor):
            if not bitwise_equal(x, y):
                return False
        elif x != y:
            return False
    return True


def aliases(outs, operands) -> bool:
    """True when an output shares storage with an operand (the kernel must allocate its output)."""
    ptrs = {t.untyped_storage().data_ptr() for t in operands if isinstance(t, torch.Tensor) and t.numel()}
    return any(o.numel() and o.untyped_storage().data_ptr() in ptrs for o in outs)


def nbytes(items) -> int:
    return sum(t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor))
