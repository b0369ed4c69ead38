"""spec/cost.py: a claim's estimated seconds from its declarations, and the run's time limit from it."""

from __future__ import annotations

from pathlib import Path

import pytest

from claimbench.spec import cost
from claimbench.spec.claim import Claim
from claimbench.spec.yamlsafe import load_document

ROOT = Path(__file__).resolve().parents[2]


def _claim(name: str) -> Claim:
    return Claim.model_validate(load_document(ROOT / "claims" / f"{name}.yaml").data)


def test_verification_grows_with_the_output_and_timing_is_the_cap_given():
    small = cost.estimate(_claim("gemv-int4-vs-bf16"), ROOT, max_time_s=10.0, warmup_s=1.0)
    big = cost.estimate(_claim("roofline-copy-gbps"), ROOT, max_time_s=10.0, warmup_s=1.0)  # a 2^28-element output
    assert small.timing_s == big.timing_s == 11.0
    assert big.verification_s > 10 * small.verification_s > 0
    assert big.total_s == pytest.approx(big.startup_s + big.verification_s + big.timing_s)


def test_the_limit_is_a_multiple_of_the_estimate_with_a_floor():
    tiny = cost.ClaimCost("x", 10.0, 1.0, 5.0, True)
    assert cost.time_limit_s(tiny) == cost.LIMIT_FLOOR_S
    large = cost.ClaimCost("y", 80.0, 60.0, 11.0, False)
    assert cost.time_limit_s(large) == pytest.approx(cost.LIMIT_FACTOR * 151.0)


def test_a_graph_compile_is_charged_per_shape_and_found_by_its_call_not_its_mention(tmp_path):
    sparse = cost.estimate(_claim("block-sparse-attention-vs-flex-attention"), ROOT, max_time_s=4.0, warmup_s=1.0)
    dense = cost.estimate(_claim("attention-flash-vs-sdpa"), ROOT, max_time_s=4.0, warmup_s=1.0)
    assert not sparse.certain and dense.certain
    assert sparse.startup_s - dense.startup_s == pytest.approx(cost.GRAPH_COMPILE_S * 4)  # 3 check shapes + its own
    (tmp_path / "m.py").write_text('"""Calls torch.compile(f) on CUDA."""\nimport torch\n')
    assert not cost.compiles_graph(tmp_path, "m.py:f")
    (tmp_path / "m.py").write_text("import torch\ng = torch.compile(abs)\n")
    assert cost.compiles_graph(tmp_path, "m.py:f")
    assert not cost.compiles_graph(tmp_path, "gone.py:f")  # unreadable: no compile charged, the run says the rest
