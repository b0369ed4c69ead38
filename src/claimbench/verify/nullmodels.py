"""Answers that mean nothing; if one passes the claim's bounds, the bounds mean nothing.

They run on every trial (a tolerance that only fails on the first trial's inputs is no bound),
on the reference the task process computed, in the orchestrator.

A null model is never materialized: each is made and judged one block of rows at a time, with the
same bounds `accuracy.compare(quick=True)` applies (relative L2, the elementwise bound against the
reference's largest magnitude, an all-zero output failing), so the memory is a few blocks and the
cost a few passes however large the output (issue 23: materialized, they took 12-30 s per trial at
the GPU claims' full sizes). An all-zero answer fails every bound by construction (its relative L2
error is 1 and `compare` refuses all zeros against a nonzero reference), so it is decided without
a pass. A reference with NaN or infinities takes the materialized path, which masks them as
`compare` does.
"""

from __future__ import annotations

import math
from typing import Callable, Optional

import numpy as np

from claimbench.verify import codec
from claimbench.verify.accuracy import compare, l2_norm

# one precision below the claim's own precision (not the CPU check's): the tolerances are the claim's
LOWER = {"float64": "float32", "float32": "float16", "tf32": "bfloat16", "float16": "bfloat16",
         "bfloat16": "float8_e4m3fn", "float8_e4m3fn": "float8_e5m2"}
# the names the orchestrator shows: what each model stands for, in plain words
DESCRIBE = {"zeros": "an all-zero output", "row_mean": "each row's mean repeated along the row",
            "one_precision_lower": "the reference rounded to one precision lower"}

MIN_ELEMENTS = 32  # below this, a rounding error can clear a bound by luck: no evidence either way
BLOCK = 1 << 15    # elements per block: a few float64 blocks fit in a core's L2

Model = Callable[[np.ndarray], np.ndarray]  # a block of rows (2-D) -> the model's answer for them


def null_models(refs: list[np.ndarray], corr, claim_dtype: Optional[str]) -> dict[str, bool]:
    """{model: passes the claim's bounds}. ``claim_dtype`` None skips the lower-precision model
    (a quantized claim checked at its CPU dtype: its output precision is the GPU's). Outputs of
    fewer than MIN_ELEMENTS elements in all give no verdict (an empty dict). A model identical to
    the reference (an exactly representable answer) means something and is left out."""
    if sum(r.size for r in refs) < MIN_ELEMENTS:
        return {}
    refs = [np.asarray(r, dtype=np.float64) for r in refs]
    if not all(bool(np.isfinite(r).all()) for r in refs):
        return _materialized(refs, corr, claim_dtype)
    models: dict[str, Model] = {}
    if all(r.ndim >= 1 and r.shape[-1] > 1 for r in refs):
        models["row_mean"] = lambda rows: np.broadcast_to(rows.mean(axis=-1, keepdims=True), rows.shape)
    lower = LOWER.get(claim_dtype or "")
    if corr.method == "allclose" and lower is not None:
        models["one_precision_lower"] = _rounded(lower)
    out = {}
    if any(np.count_nonzero(r) for r in refs):  # no boolean temporary the size of the output
        out["zeros"] = False
    scales = [max(abs(float(r.max())), abs(float(r.min()))) if r.size else 0.0 for r in refs]  # no |r| temporary
    for name, model in models.items():
        verdicts = [_judge(r, s, model, corr=corr) for r, s in zip(refs, scales)]
        if all(v is None for v in verdicts):
            continue  # identical to the reference everywhere
        out[name] = all(v is not False for v in verdicts)
    return out


def _rounded(dtype: str) -> Model:
    return lambda rows: codec.round_to(rows, dtype)


def _judge(ref: np.ndarray, scale: float, model: Model, *, corr) -> Optional[bool]:
    """Whether ``model`` passes against one finite reference, block by block; None when its answer
    is the reference itself."""
    if not ref.size:
        return None
    rows = ref.reshape(-1, ref.shape[-1]) if ref.ndim >= 1 else ref.reshape(1, 1)
    per = max(1, BLOCK // max(1, rows.shape[1]))
    rnorm = err = 0.0
    differs = any_out = False
    bound_c = corr.atol * scale if corr.method == "allclose" else 0.0  # "exact" states no atol
    for a in range(0, rows.shape[0], per):
        rb = rows[a:a + per]
        vb = model(rb)
        if not bool(np.isfinite(vb).all()):
            return False  # NaN or Inf where the reference is finite
        d = vb - rb
        differs = differs or bool(np.any(d))
        any_out = any_out or bool(np.any(vb))
        rnorm, err = math.hypot(rnorm, l2_norm(rb)), math.hypot(err, l2_norm(d))
        if corr.method == "allclose":
            np.abs(d, out=d)
            if bool(np.any(d > np.abs(rb) * corr.rtol + bound_c)):
                return False if differs else None
    if not differs:
        return None
    if corr.method != "allclose" or (rnorm > 0 and not any_out):
        return False  # exact: any difference fails; all zeros against a nonzero reference fails
    rel = err / rnorm if rnorm > 0 else err
    return bool(rel <= corr.max_rel_l2)


def _materialized(refs: list[np.ndarray], corr, claim_dtype: Optional[str]) -> dict[str, bool]:
    """Each model whole, judged by `compare` (a reference with NaN or infinities, masked there)."""
    models = {"zeros": [np.zeros_like(r) for r in refs]}
    if all(r.ndim >= 1 and r.shape[-1] > 1 for r in refs):
        models["row_mean"] = [np.broadcast_to(np.nanmean(r, axis=-1, keepdims=True), r.shape) for r in refs]
    lower = LOWER.get(claim_dtype or "")
    if corr.method == "allclose" and lower is not None:
        models["one_precision_lower"] = [codec.round_to(r, lower) for r in refs]
    out = {}
    for name, vals in models.items():
        if all(np.array_equal(v, r, equal_nan=True) for v, r in zip(vals, refs)):
            continue
        out[name] = all(compare(v, r, corr, quick=True)["passed"] for v, r in zip(vals, refs))
    return out


def explain(passing: list[str]) -> str:
    return "; ".join(DESCRIBE.get(n, n) for n in passing)
