"""Answers that mean nothing; if one passes the claim's bounds, the bounds mean nothing.

They run on every trial (a tolerance that only fails on the first trial's inputs is no bound),
on the reference the task process computed, in the orchestrator.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from claimbench.verify import codec
from claimbench.verify.accuracy import compare

# one precision below the claim's own precision (not the CPU check's): the tolerances are the claim's
LOWER = {"float64": "float32", "float32": "float16", "tf32": "bfloat16", "float16": "bfloat16",
         "bfloat16": "float8_e4m3fn", "float8_e4m3fn": "float8_e5m2"}
# the names the orchestrator shows: what each model stands for, in plain words
DESCRIBE = {"zeros": "an all-zero output", "row_mean": "each row's mean repeated along the row",
            "one_precision_lower": "the reference rounded to one precision lower"}


MIN_ELEMENTS = 32  # below this, a rounding error can clear a bound by luck: no evidence either way


def null_models(refs: list[np.ndarray], corr, claim_dtype: Optional[str]) -> dict[str, bool]:
    """{model: passes the claim's bounds}. ``claim_dtype`` None skips the lower-precision model
    (a quantized claim checked at its CPU dtype: its output precision is the GPU's). Outputs of
    fewer than MIN_ELEMENTS elements in all give no verdict (an empty dict)."""
    if sum(r.size for r in refs) < MIN_ELEMENTS:
        return {}
    models = {"zeros": [np.zeros_like(r) for r in refs]}
    if all(r.ndim >= 1 and r.shape[-1] > 1 for r in refs):
        models["row_mean"] = [np.broadcast_to(np.nanmean(r, axis=-1, keepdims=True), r.shape) for r in refs]
    lower = LOWER.get(claim_dtype or "")
    if corr.method == "allclose" and lower is not None:
        models["one_precision_lower"] = [codec.round_to(r, lower) for r in refs]
    out = {}
    for name, vals in models.items():
        if all(np.array_equal(v, r, equal_nan=True) for v, r in zip(vals, refs)):
            continue  # identical to the reference (an exactly representable answer): it means something
        out[name] = all(compare(v, r, corr, quick=True)["passed"] for v, r in zip(vals, refs))
    return out


def explain(passing: list[str]) -> str:
    return "; ".join(DESCRIBE.get(n, n) for n in passing)
