"""What the Triton kernel tests share: a claim's own shapes, dtype and tolerances drive them.

The whole CPU check of each shipped claim (every ``check_params`` shape, kernel and baseline
through ``prepare``, the claim's bounds against its float64 reference) runs through the product's
own path: as a claim item of the test command (`pytest --claims claims`), in the real runner's
processes. These helpers serve the tests that go further than a claim does: shapes and seeds of
their own (``check_sides``), tile schedules, properties of one kernel. The interpreter is set up
by ``tests/conftest.py``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]


def load_claim(claim_id: str) -> dict:
    return yaml.safe_load((ROOT / "claims" / f"{claim_id}.yaml").read_text(encoding="utf-8"))


def resolve(ref: str):
    """``kernels/x.py:fn`` -> the function (imported as ``kernels.x``)."""
    path, _, name = ref.rpartition(":")
    return getattr(importlib.import_module(path[:-3].replace("/", ".")), name)


def inputs(claim: dict, params: dict, seed: int = 0) -> tuple:
    dtype = claim["precision"].get("check_dtype") or claim["precision"]["dtype"]
    return resolve(claim["workload"]["inputs"])(seed=seed, device="cpu", dtype=dtype, **params)


def run_side(claim: dict, side: str, args: tuple) -> torch.Tensor:
    spec = claim[side]
    if spec.get("prepare"):
        args = resolve(spec["prepare"])(*args)
    return resolve(spec["impl"])(*args)


def assert_matches(out: torch.Tensor, ref: torch.Tensor, corr: dict, what: str) -> None:
    """The claim's bounds: rel L2, elementwise atol*max|ref| + rtol*|ref|, or exact equality."""
    assert out.shape == ref.shape, f"{what}: shape {tuple(out.shape)} != {tuple(ref.shape)}"
    o, r = out.detach().to(torch.float64), ref.detach().to(torch.float64)
    assert torch.isfinite(o).all(), f"{what}: non-finite output"
    if corr["method"] == "exact":
        assert torch.equal(o, r), f"{what}: not exact, max |err| {(o - r).abs().max():.3g}"
        return
    rel_l2 = float((o - r).norm() / r.norm()) if r.norm() > 0 else float((o - r).norm())
    assert rel_l2 <= corr["max_rel_l2"], f"{what}: rel L2 {rel_l2:.3g} > {corr['max_rel_l2']}"
    bound = corr["atol"] * r.abs().max() + corr["rtol"] * r.abs()
    bad = int(((o - r).abs() > bound).sum())
    assert bad == 0, f"{what}: {bad} elements outside atol*max|ref| + rtol*|ref|"


def check_sides(claim: dict, params: dict, seed: int) -> None:
    """Kernel and baseline, each through its ``prepare``, against the reference at one shape and
    seed: for tests that pick their own seed or add shapes to the claim's ``check_params``."""
    corr = claim["correctness"]
    args = inputs(claim, params, seed)
    ref = resolve(corr["reference"])(*args)
    outs = {side: run_side(claim, side, args) for side in ("kernel", "baseline")}
    for side, out in outs.items():
        assert_matches(out, ref, corr, f"{claim['id']} {side} {params}")
    k, b = outs["kernel"], outs["baseline"]
    # the run holds the kernel to the baseline's output dtype (issue 26: a scaffolded test passed a
    # kernel returning float64 for a float32 claim, and `run` then said incorrect)
    assert not isinstance(k, torch.Tensor) or not isinstance(b, torch.Tensor) or k.dtype == b.dtype, (
        f"{claim['id']} {params}: the kernel returns {k.dtype} where the baseline returns {b.dtype}; "
        "the run compares them and calls a different dtype incorrect")


def assert_seeds_differ(claim_id: str) -> None:
    claim = load_claim(claim_id)
    params = claim["workload"]["check_params"][0]
    a, b = inputs(claim, params, seed=1), inputs(claim, params, seed=2)
    assert any(not torch.equal(x, y) for x, y in zip(a, b)), f"{claim_id}: seeds 1 and 2 give equal inputs"
    assert all(x.abs().max() > 0 for x in a), f"{claim_id}: an input is all zeros"
