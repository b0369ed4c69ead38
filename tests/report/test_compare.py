"""compare: B against A, claim by claim, through the command a CI job calls (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.report.compare import Change, Side, judge
from claimbench.store.record import write_record


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return rk.copy_tree(tmp_path_factory.mktemp("cmp") / "proj")


def _rec(root: Path, folder: Path, kernel_us: float, *, claim: str = "softmax-online", hw: str = "nvidia-h200",
         created: str = "2026-11-02T09:00:00.000000Z", seed: int = 1, noise: float = 0.01, baseline_us: float = 243
         ) -> Path:
    rec = rk.build(root, claim, hw=hw, created=created, kernel_us=kernel_us, baseline_us=baseline_us, seed=seed,
                   noise=noise)
    assert rec.value is not None, rec.reason  # every fixture here carries a number
    return write_record(folder, rec)


def _json(capsys) -> list[dict]:
    return json.loads(capsys.readouterr().out)


def test_two_records_same_faster_slower(root, tmp_path, capsys):
    a = _rec(root, tmp_path / "a", 150)
    for kernel_us, change, code in ((151, "SAME", 0), (120, "FASTER", 0), (200, "SLOWER", 1)):
        b = _rec(root, tmp_path / f"b{kernel_us}", kernel_us, seed=2)
        assert main(["compare", str(a), str(b), "--format", "json"]) == code
        (row,) = _json(capsys)
        assert row["change"] == change and row["a"]["path"] == str(a) and row["b"]["path"] == str(b), row
        assert (row["ratio"] > 1) == (kernel_us < 150) or change == "SAME"


def test_folders_match_claims_and_machines_and_a_lost_number_fails(root, tmp_path, capsys):
    a, b = tmp_path / "a", tmp_path / "b"
    _rec(root, a, 150)
    _rec(root, a, 200, hw="nvidia-h100", baseline_us=304)
    _rec(root, b, 120, created="2026-11-01T09:00:00.000000Z", seed=3)  # older: the latest below decides
    _rec(root, b, 150, created="2026-11-03T09:00:00.000000Z", seed=4)
    assert main(["compare", str(a), str(b)]) == 1  # the H100 number is gone from B
    out = capsys.readouterr().out
    assert "SAME" in out and "MISSING" in out and "compare: 1 SAME, 1 MISSING" in out, out
    assert main(["compare", str(a), str(a), "--format", "json"]) == 0
    assert {r["change"] for r in _json(capsys)} == {"SAME"}


def test_a_record_audit_refuses_is_never_compared(root, tmp_path, capsys):
    a = _rec(root, tmp_path / "a", 150)
    forged = tmp_path / "b" / a.name
    forged.parent.mkdir()
    d = json.loads(a.read_text())
    d["value"] = d["value"] * 3  # a faster number, not its samples'
    forged.write_text(json.dumps(d))
    assert main(["compare", str(a), str(forged), "--format", "json"]) == 1
    (row,) = _json(capsys)
    assert row["change"] == "REFUSED" and "edited by hand" in row["note"], row


def test_wide_intervals_are_ambiguous_and_fail_only_when_strict(root, tmp_path, capsys):
    a = _rec(root, tmp_path / "a", 150, noise=0.25)
    b = _rec(root, tmp_path / "b", 170, seed=2, noise=0.25)
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    (row,) = _json(capsys)
    assert row["change"] == "AMBIGUOUS", row
    assert main(["compare", str(a), str(b), "--strict"]) == 1


def test_time_is_better_when_it_is_smaller():
    a = Side("a", "h", "time_us", 100.0, 99.0, 101.0, "verified")
    b = Side("b", "h", "time_us", 50.0, 49.0, 51.0, "verified")
    change, ratio, _ = judge(a, b, 0.05)
    assert change == Change.FASTER and ratio == pytest.approx(2.0)
    assert judge(b, a, 0.05)[0] == Change.SLOWER


@pytest.mark.parametrize("argv", [["--threshold", "1.5"], ["--threshold", "-0.1"]])
def test_usage_errors_change_nothing_and_exit_2(root, tmp_path, capsys, argv):
    a = _rec(root, tmp_path / "a", 150)
    assert main(["compare", str(a), str(a), *argv]) == 2
    assert main(["compare", str(a), str(tmp_path)]) == 2  # a file against a folder
    assert main(["compare", str(a), str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err
    assert all(line.startswith("claimbench: ") for line in err.splitlines()) and "Traceback" not in err
