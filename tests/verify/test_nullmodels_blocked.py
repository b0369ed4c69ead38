"""The blocked null models decide exactly what the materialized ones decided (issue 23): the same
bounds, one block of rows at a time, on random references, shapes and tolerances."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from claimbench.verify import nullmodels


def _corr(method, rel, rtol, atol):
    return SimpleNamespace(method=method, max_rel_l2=rel, rtol=rtol, atol=atol)


@pytest.mark.parametrize("seed", range(40))
def test_blocked_and_materialized_agree(seed):
    rng = np.random.default_rng(seed)
    shape = [(64, 33), (3, 70000), (40000,), (2, 5, 4097), (1, 64)][seed % 5]
    kind = seed % 4
    ref = rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4)
    if kind == 1:
        ref = np.abs(ref) + 1.0                            # rows whose mean is close to the values
    elif kind == 2:
        ref = np.round(ref * 4) / 4                        # exactly representable in low precisions
    elif kind == 3:
        ref = np.broadcast_to(ref[..., :1], shape).copy()  # constant rows: row_mean is exact
    rel = float(10.0 ** rng.uniform(-5, 0))
    corr = _corr("allclose", rel, float(10.0 ** rng.uniform(-5, 0)), float(10.0 ** rng.uniform(-7, -1))) \
        if seed % 7 else _corr("exact", None, None, None)  # an exact claim states no tolerances
    dtype = ["float32", "bfloat16", "float16", "float8_e4m3fn", None][seed % 5]
    refs = [ref, rng.standard_normal(50)] if seed % 3 == 0 else [ref]
    assert nullmodels.null_models(refs, corr, dtype) == nullmodels._materialized(refs, corr, dtype)


def test_loose_bounds_are_found_and_tight_ones_are_not():
    ref = np.random.default_rng(0).standard_normal((256, 512))
    loose = _corr("allclose", 1e-1, 1e-1, 1e-3)
    tight = _corr("allclose", 1e-6, 1e-6, 1e-8)
    assert nullmodels.null_models([ref], loose, "bfloat16")["one_precision_lower"] is True
    got = nullmodels.null_models([ref], tight, "bfloat16")
    assert got == {"zeros": False, "row_mean": False, "one_precision_lower": False}


def test_a_reference_with_nan_takes_the_masked_path():
    ref = np.random.default_rng(1).standard_normal((64, 64))
    ref[3, 4] = np.nan
    corr = _corr("allclose", 1e-1, 1e-1, 1e-3)
    assert nullmodels.null_models([ref], corr, "bfloat16") == nullmodels._materialized([ref], corr, "bfloat16")
