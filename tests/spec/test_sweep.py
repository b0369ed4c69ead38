"""A claim's sweep: one params name and its values, checked as the claim is, located like any key."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import pytest
import yaml

from claimbench.gate.policy import gate_file
from claimbench.spec.claim import Claim, Workload

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SWEPT = FIXTURES / "claims" / "valid" / "rowsum-cpu-sweep.yaml"
BASE = yaml.safe_load(SWEPT.read_text(encoding="utf-8"))


def workload(**sweep) -> dict:
    w = copy.deepcopy(BASE["workload"])
    w["sweep"] = sweep
    return w


def test_the_shipped_fixture_sweeps_rows_around_its_own_point():
    w = Claim.model_validate(BASE).workload
    assert w.off_points() == [1024]
    assert w.at(1024).params == {"rows": 1024, "cols": 2048} and w.params["rows"] == 2048
    assert Workload.model_validate({k: v for k, v in BASE["workload"].items() if k != "sweep"}).off_points() == []


@pytest.mark.parametrize("sweep, message", [
    ({"rows": [1024, 2048], "cols": [8, 2048]}, "sweep names one params name, not 2"),
    ({"batch": [1, 2]}, "sweep axis `batch` is not a params name"),
    ({"rows": [2048]}, "sweep rows has 1 values; give 2 to 8"),
    ({"rows": list(range(1, 9)) + [2048]}, "sweep rows has 9 values"),
    ({"rows": [1024.0, 2048]}, "values must all be int, as params rows is"),
    ({"rows": [True, 2048]}, "values must all be int"),
    ({"rows": [1024, 1024, 2048]}, "lists a value twice"),
    ({"rows": [1024, 4096]}, "must include params rows (2048)"),
])
def test_a_malformed_sweep_is_refused_with_the_reason(sweep, message):
    with pytest.raises(ValueError, match=None) as e:
        Workload.model_validate(workload(**sweep))
    assert message in str(e.value)


def _project(tmp_path: Path, claim: dict) -> Path:
    root = tmp_path / "proj"
    shutil.copytree(FIXTURES / "kernels", root / "kernels")
    shutil.copy(FIXTURES / "LIST.md", root / "LIST.md")
    (root / "claims").mkdir()
    (root / "claims" / "rowsum-cpu-sweep.yaml").write_text(yaml.safe_dump(claim, sort_keys=False), encoding="utf-8")
    return root


def test_check_locates_a_bad_sweep_at_its_key(tmp_path):
    claim = copy.deepcopy(BASE)
    claim["workload"]["sweep"] = {"rows": [1024, 4096]}
    root = _project(tmp_path, claim)
    res = gate_file(root / "claims" / "rowsum-cpu-sweep.yaml", root)
    assert not res.ok
    p = res.problems[0]
    assert p.key.startswith("workload") and "must include params rows (2048)" in p.message and p.line > 1


def test_check_holds_flops_and_bytes_positive_at_every_sweep_point(tmp_path):
    """A byte count that is fine at the claim's params but not at another point fails check, naming the point."""
    claim = copy.deepcopy(BASE)
    claim["workload"]["sweep"] = {"rows": [1, 2048]}
    claim["workload"]["bytes"] = "(rows - 1) * cols * 4"
    claim["workload"]["check_params"] = [{"rows": 3, "cols": 17}]
    root = _project(tmp_path, claim)
    res = gate_file(root / "claims" / "rowsum-cpu-sweep.yaml", root)
    assert not res.ok
    assert any(p.key == "workload.bytes" and "for the sweep point 1" in p.message for p in res.problems), res.problems
