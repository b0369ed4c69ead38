"""Verify: is this output the right answer? Accuracy, null models, properties, poisoning.

Comparisons run in float64 on CPU copies, so a tensor subclass cannot lie to them and a device
cannot round them. Every check returns data; nothing here raises on a wrong answer.
"""

from __future__ import annotations

from typing import Any

import torch

from .accuracy import compare

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


def compare_all(outs, refs, corr, expect=None, *, quick: bool = False) -> dict:
    if len(outs) != len(refs):
        return {"passed": False, "reason": f"{len(outs)} outputs, reference has {len(refs)}", "outputs": []}
    rows = [compare(o, r, corr, None if expect is None else expect[i], quick=quick) for i, (o, r) in enumerate(zip(outs, refs))]
    bad = [f"output {i}: {row['reason']}" for i, row in enumerate(rows) if not row["passed"]]
    return {"passed": not bad, "reason": "; ".join(bad), "outputs": rows}


def null_models(refs, corr, out_dtypes, claim_dtype: str | None = None) -> dict:
    """Answers that mean nothing; if one passes the claim's bounds, the bounds mean nothing.

    The lower-precision model rounds the reference one step below the claim's precision (for
    integer/quantized claims, below the output's dtype)."""
    verdicts = {}
    models = {"zeros": [torch.zeros_like(r) for r in refs]}
    if all(r.dim() >= 1 and r.shape[-1] > 1 for r in refs):
        models["row_mean"] = [r.mean(dim=-1, keepdim=True).expand_as(r) for r in refs]
    if claim_dtype == "skip":
        lower = [None for _ in out_dtypes]
    elif claim_dtype in LOWER_BY_NAME:
        lower = [LOWER_BY_NAME[claim_dtype] for _ in out_dtypes]
    else:
        lower = [LOWER.get(d) for d in out_dtypes]
    if corr.method == "allclose" and all(lo is not None and d.is_floating_point for lo, d in zip(lower, out_dtypes)):
        models["one_precision_lower"] = [r.to(lo).to(torch.float64) for r, lo in zip(refs, lower)]
    for name, vals in models.items():
        res = compare_all(vals, refs, corr, quick=True)
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


_SAME_WIDTH_INT = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same bits (NaN equals NaN, -0.0 differs from 0.0), compared as integers of the element's
    width: several times faster than byte by byte."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    plain = a.is_complex() or a.dtype is torch.bool
    view = torch.uint8 if plain else _SAME_WIDTH_INT.get(a.element_size(), torch.uint8)
    return bool(torch.equal(a.detach().reshape(-1).contiguous().view(view),
                            b.detach().reshape(-1).contiguous().view(view)))


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
