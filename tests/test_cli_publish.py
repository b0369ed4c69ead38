"""The publish, audit, table, site and show --record commands through `claimbench.cli.main`."""

from __future__ import annotations

import json

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.report import publish as publish_mod


@pytest.fixture
def root(tmp_path):
    return rk.standard_tree(tmp_path / "proj")[0]


def test_publish_then_audit(root, capsys):
    before = (root / "LIST.md").read_text()
    assert main(["--root", str(root), "publish", "--dry-run"]) == 1  # it would take the stale 9.99× off
    out = capsys.readouterr().out
    assert "list would change" in out and "+- Single-pass Parallel Prefix Scan" in out
    assert "  - Foundational kernel exercises > Efficient Matrix Transpose in CUDA C/C++: taken off, no current" in out
    assert (root / "LIST.md").read_text() == before
    assert main(["--root", str(root), "audit"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1].startswith("audit: 5 problems in LIST.md and 13 records")
    assert out[0].startswith("LIST.md:9: Foundational kernel exercises > Efficient Matrix Transpose")
    assert main(["--root", str(root), "publish"]) == 1
    assert main(["--root", str(root), "publish"]) == 0  # nothing left to take off, nothing refused
    capsys.readouterr()
    assert main(["--root", str(root), "audit", "--no-cache"]) == 0
    assert capsys.readouterr().out.startswith("audit: 0 problems")


def test_publish_names_corrupt_records_on_stderr(root, capsys):
    bad = next((root / "results" / "records" / "deepgemm-fp8").glob("*.json"))
    bad.write_text("{")
    assert main(["--root", str(root), "publish"]) == 1
    err = capsys.readouterr().err
    assert f"  ! refused results/records/deepgemm-fp8/{bad.name}: record: records/deepgemm-fp8/{bad.name}: corrupt" in err
    assert main(["--root", str(root), "audit"]) == 1


def test_bad_list_exits_1_with_one_line(root, capsys):
    lst = root / "LIST.md"
    lst.write_text(lst.read_text().replace("- DeepGEMM -", "- DeepGEMM - x\n- DeepGEMM -"))
    assert main(["--root", str(root), "publish"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("claimbench: ") and "appears twice" in err and len(err.splitlines()) == 1


def test_missing_list_is_usage_error(root, capsys):
    assert main(["--root", str(root), "publish", "--list", str(root / "NOPE.md")]) == 2


def test_table_formats_and_compare(root, capsys):
    assert main(["--root", str(root), "table", "--format", "json", "--verdict", "refuted"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["claim"] for r in rows} == {"deepgemm-fp8", "transpose-tiled"}
    assert main(["--root", str(root), "table", "--compare", "nvidia-h200", "nvidia-h100"]) == 0
    assert "| claim | metric | value nvidia-h200 |" in capsys.readouterr().out


def test_show_record(root, capsys):
    path = next((root / "results" / "records" / "scan-decoupled").glob("*nvidia-h200*.json"))
    assert main(["show", "--record", str(path)]) == 0
    assert "verdict    verified: sol_fraction" in capsys.readouterr().out


def test_site_command_wiring(root, capsys, monkeypatch):
    import claimbench.report.site

    seen = {}

    def fake(r, out, *, list_path, results_dir, records_url):
        seen.update(root=r, out=out, list_path=list_path, results_dir=results_dir, records_url=records_url)
        return out / "index.html"

    monkeypatch.setattr(claimbench.report.site, "build_site", fake)
    assert main(["--root", str(root), "site"]) == 0
    assert seen["out"] == root / "results" / "site" and seen["list_path"] == root / "LIST.md"
    assert seen["records_url"] is None
    assert capsys.readouterr().out.strip() == f"site written: {root / 'results' / 'site' / 'index.html'}"


@pytest.mark.parametrize("argv,phrase", [
    (["publish", "--results", "resuls"], "no such folder"),
    (["publish", "--max-per-entry", "-1"], "must be 1 or more"),
    (["audit", "--results", "resuls"], "no such folder"),
])
def test_a_usage_error_changes_nothing(tmp_path, argv, phrase, capsys):
    """Issue 25: `publish --results resuls` took every number off and rewrote LIST.md; a negative
    count was accepted. A usage error is exit 2 and leaves every file as it was."""
    root, _ = rk.standard_tree(tmp_path / "proj")
    publish_mod.publish(root, root / "LIST.md", root / "results")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    assert main(["--root", str(root), *argv]) == 2
    assert phrase in capsys.readouterr().err
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


@pytest.mark.parametrize("command", [["table"], ["publish", "--dry-run"], ["list"], ["audit"]])
def test_a_reader_that_left_is_exit_1_and_no_traceback(root, command):
    """`claimbench publish | head -1` printed a BrokenPipeError traceback (an adversarial review)."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone before the first line
    try:
        p = subprocess.run([sys.executable, "-m", "claimbench", "--root", str(root), *command], stdout=write,
                           stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr[-2000:]
