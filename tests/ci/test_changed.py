"""--changed-since in a throwaway git repository: claim files, imported modules, untracked files."""

import shutil
import subprocess
from pathlib import Path

import pytest

from claimbench.ci.changed import changed_claims
from claimbench.errors import UsageError

FIX = Path(__file__).resolve().parents[1] / "fixtures"

CLAIM = """id: {id}
title: t
entry: NCCL
source: {{kind: implementer-report, title: t, url: "https://example.org/x", locator: s}}
hardware: {{device: cpu, model: ["*"]}}
workload: {{inputs: "kernels/{mod}.py:make_inputs", params: {{n: 4}}, bytes: "n * 4"}}
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/{mod}.py:kernel"}}
baseline: {{name: b, impl: "kernels/{mod}.py:baseline"}}
correctness: {{method: exact, reference: "kernels/{mod}.py:reference"}}
claimed: {{metric: speedup, value: 1.0, tolerance: 0.1}}
"""


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """Two claims: `a` uses kernels/a.py, which imports kernels/common.py; `b` uses kernels/b.py."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "claims").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    (tmp_path / "kernels" / "common.py").write_text("SCALE = 1\n")
    (tmp_path / "kernels" / "a.py").write_text("from kernels.common import SCALE\n")
    (tmp_path / "kernels" / "b.py").write_text("import torch\n")
    for cid, mod in (("a", "a"), ("b", "b")):
        (tmp_path / "claims" / f"{cid}.yaml").write_text(CLAIM.format(id=cid, mod=mod))
    _git(tmp_path, "init", "-q", "-b", "main")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "add", "-A")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "base")
    return tmp_path


def _claims(repo: Path) -> list[Path]:
    return sorted((repo / "claims").glob("*.yaml"))


def _names(paths) -> list[str]:
    return [p.stem for p in paths]


def test_nothing_changed_selects_nothing(repo):
    assert changed_claims(repo, _claims(repo), "main") == []


def test_an_imported_module_selects_the_claims_that_import_it(repo):
    (repo / "kernels" / "common.py").write_text("SCALE = 2\n")
    assert _names(changed_claims(repo, _claims(repo), "main")) == ["a"]


def test_a_committed_claim_file_change_on_a_branch(repo):
    _git(repo, "checkout", "-q", "-b", "pr")
    (repo / "claims" / "b.yaml").write_text(CLAIM.format(id="b", mod="b").replace("value: 1.0", "value: 1.2"))
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "tweak b")
    assert _names(changed_claims(repo, _claims(repo), "main")) == ["b"]


def test_changes_on_the_target_branch_after_branching_do_not_count(repo):
    _git(repo, "checkout", "-q", "-b", "pr")
    _git(repo, "checkout", "-q", "main")
    (repo / "kernels" / "common.py").write_text("SCALE = 3\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "main moves on")
    _git(repo, "checkout", "-q", "pr")
    assert changed_claims(repo, _claims(repo), "main") == []


def test_untracked_files_count(repo):
    (repo / "claims" / "c.yaml").write_text(CLAIM.format(id="c", mod="b"))
    assert _names(changed_claims(repo, _claims(repo), "main")) == ["c"]


def test_an_unparsable_claim_is_kept(repo):
    (repo / "claims" / "a.yaml").write_text("id: [unclosed\n")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "break a")
    assert _names(changed_claims(repo, _claims(repo), "HEAD")) == ["a"]


def test_a_bad_ref_is_one_usage_line(repo):
    with pytest.raises(UsageError) as e:
        changed_claims(repo, _claims(repo), "origin/nope")
    assert "origin/nope" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(UsageError):
        changed_claims(repo, _claims(repo), "--output=/tmp/x")


def test_outside_a_repository_is_a_usage_error(tmp_path):
    shutil.copytree(FIX / "distributed" / "claims", tmp_path / "claims")
    with pytest.raises(UsageError, match="not inside a git repository"):
        changed_claims(tmp_path, _claims(tmp_path), "main")
