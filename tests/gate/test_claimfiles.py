"""claimfiles: what a user names on the command line (a file, a folder or a claim id) becomes claim files."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from claimbench.cli import main
from claimbench.errors import UsageError
from claimbench.gate.claimfiles import named_claims

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "proj"
    (root / "claims" / "grouped").mkdir(parents=True)
    for name in ("softmax-online.yaml", "rowsum-cpu.yaml"):
        (root / "claims" / name).write_text("id: x\n")
    (root / "claims" / "grouped" / "gemm-tiled.yaml").write_text("id: y\n")
    return root


def test_a_path_is_kept_and_an_id_becomes_its_claim_file(project, monkeypatch):
    monkeypatch.chdir(project)
    assert named_claims(["claims/softmax-online.yaml", "claims"], project) == ["claims/softmax-online.yaml", "claims"]
    assert named_claims(["rowsum-cpu", "gemm-tiled"], project) == [
        str(project / "claims" / "rowsum-cpu.yaml"), str(project / "claims" / "grouped" / "gemm-tiled.yaml")]


def test_a_dangling_link_is_kept_for_find_claims_to_report(project, monkeypatch):
    monkeypatch.chdir(project)
    os.symlink(project / "nowhere.yaml", project / "claims" / "dangling.yaml")
    assert named_claims(["claims/dangling.yaml"], project) == ["claims/dangling.yaml"]


@pytest.mark.parametrize(("arg", "hint"), [
    ("softmax-onlin", "did you mean softmax-online?"),
    ("claims/rowsum-cpux.yaml", "did you mean rowsum-cpu?"),
    ("zzzz", "claims are under"),
])
def test_anything_else_is_a_usage_error_naming_the_nearest_ids(project, monkeypatch, arg, hint):
    monkeypatch.chdir(project)
    with pytest.raises(UsageError, match=f"^{arg}: no such file, folder or claim id; {hint}"):
        named_claims([arg], project)


def test_check_and_list_take_a_claim_id_and_run_refuses_a_wrong_one_touching_nothing(tmp_path, monkeypatch, capsys):
    root = tmp_path / "proj"
    shutil.copytree(REPO / "claims", root / "claims")
    shutil.copytree(REPO / "kernels", root / "kernels")
    shutil.copy(REPO / "LIST.md", root / "LIST.md")
    monkeypatch.chdir(root)
    assert main(["check", "cpu-softmax-fused-vs-naive"]) == 0
    assert "1 claim checked: 1 passed" in capsys.readouterr().out
    assert main(["list", "cpu-softmax-fused-vs-naive"]) == 0
    assert "cpu-softmax-fused-vs-naive" in capsys.readouterr().out
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    assert main(["run", "cpu-softmax-fused-vs-nave"]) == 2
    assert "did you mean cpu-softmax-fused-vs-naive?" in capsys.readouterr().err
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before
