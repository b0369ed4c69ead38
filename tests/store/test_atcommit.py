"""A record against its commit, in a real git repository: the answers, and the memo that spares git
the files it has already read (never the question whether the commit is still there)."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from claimbench.store import atcommit
from claimbench.store.atcommit import MEMO_NAME, CommitFiles


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "proj"
    (root / "claims").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "claims" / "c.yaml").write_text("id: c\n")
    (root / "kernels" / "k.py").write_text("x = 1\n")
    _git(root, "init", "-q")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return root, _git(root, "rev-parse", "HEAD")


def _sha(root: Path, rel: str) -> str:
    return hashlib.sha256((root / rel).read_bytes()).hexdigest()


@pytest.fixture
def asked(monkeypatch):
    """Every spec git is asked for, in order."""
    seen: list[str] = []
    real = atcommit.git_typed_objects

    def spy(root, specs):
        seen.extend(specs)
        return real(root, specs)
    monkeypatch.setattr(atcommit, "git_typed_objects", spy)
    return seen


def _problem(cf: CommitFiles, root: Path, commit: str, kernel_sha: str = ""):
    return cf.problem(commit, ("claims/c.yaml", _sha(root, "claims/c.yaml")),
                      {"kernels/k.py": kernel_sha or _sha(root, "kernels/k.py")})


def test_a_second_reader_takes_the_files_from_the_memo_and_still_asks_for_the_commit(repo, asked, tmp_path):
    root, head = repo
    memo = tmp_path / "cache" / MEMO_NAME
    assert _problem(CommitFiles(root, memo=memo), root, head) is None
    # the commit, the two folders, then the two files by their blob ids
    assert asked[:3] == [f"{head}^{{commit}}", f"{head}:claims", f"{head}:kernels"] and len(asked) == 5
    assert memo.is_file()
    stored = json.loads(memo.read_text())
    assert stored == {f"{head}:claims/c.yaml": _sha(root, "claims/c.yaml"), f"{head}:kernels/k.py": _sha(root, "kernels/k.py")}
    asked.clear()
    assert _problem(CommitFiles(root, memo=memo), root, head) is None
    assert asked == [f"{head}^{{commit}}"]  # only whether the commit is still here
    key, msg = _problem(CommitFiles(root, memo=memo), root, head, kernel_sha="0" * 64)
    assert key == "source_sha256" and "does not have the sha256" in msg  # the memo's answer is the file's


def test_a_remembered_file_does_not_vouch_for_a_commit_that_is_gone(repo, tmp_path):
    root, head = repo
    memo = tmp_path / MEMO_NAME
    gone = "f" * 40
    memo.write_text(json.dumps({f"{gone}:claims/c.yaml": _sha(root, "claims/c.yaml"),
                                f"{gone}:kernels/k.py": _sha(root, "kernels/k.py")}))
    key, msg = _problem(CommitFiles(root, memo=memo), root, gone)
    assert key == "git_commit" and "not in this repository" in msg


def test_short_hashes_and_malformed_entries_are_not_remembered(repo, tmp_path):
    root, head = repo
    memo = tmp_path / MEMO_NAME
    assert _problem(CommitFiles(root, memo=memo), root, head[:12]) is None
    assert not memo.exists()  # a short hash may name another commit once the history grows
    memo.write_text(json.dumps({f"{head}:kernels/k.py": "not a sha", "HEAD:claims/c.yaml": "0" * 64}))
    assert atcommit._read_memo(memo) == {}


def test_without_a_memo_nothing_is_written(repo, tmp_path):
    root, head = repo
    assert _problem(CommitFiles(root), root, head) is None
    assert not list(tmp_path.rglob("atcommit-*.json"))


def test_files_of_a_missing_commit_are_not_remembered_as_missing(repo, tmp_path):
    root, head = repo
    memo = tmp_path / MEMO_NAME
    later = "e" * 40  # a commit this clone does not have yet
    key, _ = _problem(CommitFiles(root, memo=memo), root, later)
    assert key == "git_commit"
    assert not memo.exists() or not any(k.startswith(later) for k in json.loads(memo.read_text()))


def test_files_are_found_through_their_folders_and_read_once_whatever_the_commits(repo, asked):
    """Two commits holding one unchanged kernel: git reads its bytes once. A file two folders
    down, a symlink (its target text, as `commit:path` gives it), a folder named as a file, and
    paths git does not store are answered as before."""
    root, first = repo
    (root / "kernels" / "deep").mkdir()
    (root / "kernels" / "deep" / "d.py").write_text("y = 2\n")
    (root / "kernels" / "link.py").symlink_to("k.py")
    (root / "claims" / "c.yaml").write_text("id: c\nchanged: true\n")
    _git(root, "add", ".")
    _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "two")
    second = _git(root, "rev-parse", "HEAD")
    cf = CommitFiles(root)
    k = _sha(root, "kernels/k.py")
    assert cf.problem(first, ("claims/c.yaml", hashlib.sha256(b"id: c\n").hexdigest()), {"kernels/k.py": k}) is None
    assert cf.problem(second, ("claims/c.yaml", _sha(root, "claims/c.yaml")),
                      {"kernels/k.py": k, "kernels/deep/d.py": _sha(root, "kernels/deep/d.py"),
                       "kernels/link.py": hashlib.sha256(b"k.py").hexdigest()}) is None
    blobs = [s for s in asked if ":" not in s and "^" not in s]
    assert len(blobs) == len(set(blobs)) == 5  # claim twice (it changed), kernel once, d.py, the link
    for rel in ("kernels/deep", "kernels/../kernels/k.py", "./kernels/k.py", "kernels//k.py", "kernels/none.py"):
        key, msg = cf.problem(second, ("claims/c.yaml", _sha(root, "claims/c.yaml")), {rel: k})
        assert key == "source_sha256" and "does not exist" in msg, rel


def test_a_tree_that_does_not_parse_holds_no_file():
    """A crafted tree object (cut short, no name, no id) is read as holding nothing, not a crash."""
    good = b"100644 k.py\0" + bytes(20) + b"40000 sub\0" + bytes(20) + b"120000 l.py\0" + bytes(range(20))
    assert atcommit._tree_blobs(good, 20) == {"k.py": "00" * 20, "l.py": bytes(range(20)).hex()}
    for bad in (good[:-1], b"100644 k.py" + bytes(20), b" k.py\0" + bytes(20), b"100644", good + b"1"):
        assert atcommit._tree_blobs(bad, 20) is None, bad


def test_a_project_in_a_subfolder_of_its_repository_is_checked_at_its_own_files(tmp_path):
    """`git rev-parse --show-prefix` places the project: its `claims/c.yaml` is `sub/proj/claims/c.yaml`
    at the commit, and the repository's own top-level `claims/c.yaml` (other bytes) is not it."""
    top = tmp_path / "repo"
    project = top / "sub" / "proj"
    for base, text in ((top, "id: other\n"), (project, "id: c\n")):
        (base / "claims").mkdir(parents=True)
        (base / "claims" / "c.yaml").write_text(text)
    (project / "kernels").mkdir()
    (project / "kernels" / "k.py").write_text("x = 1\n")
    _git(top, "init", "-q")
    _git(top, "add", ".")
    _git(top, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = _git(top, "rev-parse", "HEAD")
    cf = CommitFiles(project)
    assert _problem(cf, project, head) is None
    key, msg = cf.problem(head, ("claims/c.yaml", _sha(top, "claims/c.yaml")), {})
    assert key == "claim_sha256" and "does not have the sha256" in msg
