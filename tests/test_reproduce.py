"""reproduce: the steps a record prints, and a rerun at the record's commit that leaves the user's
checkout alone and compares verdicts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import recordkit as rk
from test_scaffold import make_project

from claimbench.cli import main
from claimbench.reproduce import Comparison
from claimbench.store.recipe import recipe
from claimbench.store.record import load_record


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.org",
                           "-c", "commit.gpgsign=false", *args], capture_output=True, text=True, check=True).stdout


def test_recipe_of_a_gpu_record(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    rec = rk.build(root, "softmax-online", kernel_us=150, baseline_us=240)
    steps = recipe(rec, "results/records/softmax-online/x.json")
    assert steps.needs == "1 x NVIDIA H200 (compute capability 9.0, 132 SMs)"
    assert steps.shell() == (f"git checkout --detach {rec.git_commit} && ./scripts/bootstrap.sh && "
                             ".venv/bin/claimbench run claims/softmax-online.yaml")
    assert steps.lines()[-1] == "or         claimbench reproduce results/records/softmax-online/x.json"


def test_recipe_carries_repeat_hot_and_threads(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    rec = rk.build(root, "softmax-online", kernel_us=150, baseline_us=240)
    k = rec.kernel.model_copy(update={"processes": [i % 3 for i in range(len(rec.kernel.samples_us))]})
    hw = {**rec.hardware, "device": "cpu", "gpus": [], "cpu": {"model": "AMD EPYC", "cores": 4, "threads_used": 1}}
    steps = recipe(rec.model_copy(update={"kernel": k, "hardware": hw, "git_commit": None, "mode": "measured-hot"}), "r.json")
    assert steps.run_args == ("claims/softmax-online.yaml", "--repeat", "3", "--hot", "--threads", "1")
    assert steps.needs == "CPU AMD EPYC (4 cores, 1 threads used); a different CPU gives a different number"
    assert steps.shell() == "./scripts/bootstrap.sh && .venv/bin/claimbench run claims/softmax-online.yaml --repeat 3 --hot --threads 1"
    assert steps.lines()[1].startswith("commit     unknown") and not steps.lines()[-1].startswith("or")


@pytest.mark.parametrize("old, new, same", [
    (("verified", 2.0, (1.9, 2.1)), ("verified", 2.05, (2.0, 2.2)), True),
    (("verified", 2.0, (1.9, 2.1)), ("verified", 2.5, (2.4, 2.6)), False),
    (("verified", 2.0, (1.9, 2.1)), ("inconclusive", 2.0, (1.0, 3.0)), False),
    (("skipped", None, (None, None)), ("skipped", None, (None, None)), True),
])
def test_comparison(old, new, same):
    c = Comparison(old[0], new[0], old[1], new[1], old[2], new[2], "why", None)
    assert c.reproduced is same
    assert c.lines("speedup")[-1].startswith("reproduced" if same else "not reproduced")


def test_on_another_machine_the_verdict_is_compared_and_the_intervals_only_shown():
    """A Xeon's record rerun on an EPYC: "not reproduced: the intervals do not overlap" was wrong,
    since a different CPU gives a different number (issue 26); the same machine stays strict."""
    xeon, epyc = "Intel(R) Xeon(R) Processor", "AMD EPYC"
    moved = Comparison("inconclusive", "inconclusive", 3.0, 2.4, (2.9, 3.1), (2.2, 2.6), "why", None, xeon, epyc)
    assert moved.reproduced and not moved.same_machine
    lines = moved.lines("speedup")
    assert "another machine: the record ran on Intel(R) Xeon(R) Processor, this run on AMD EPYC" in lines[-2]
    assert "do not overlap" in lines[-2] and lines[-1] == "reproduced: the same verdict"
    assert not Comparison("verified", "refuted", 3.0, 2.4, (2.9, 3.1), (2.2, 2.6), "why", None, xeon, epyc).reproduced
    same = Comparison("inconclusive", "inconclusive", 3.0, 2.4, (2.9, 3.1), (2.2, 2.6), "why", None, epyc, epyc)
    assert not same.reproduced and same.lines("speedup")[-1].startswith("not reproduced")
    unknown = Comparison("inconclusive", "inconclusive", 3.0, 2.4, (2.9, 3.1), (2.2, 2.6), "why", None, "", epyc)
    assert unknown.same_machine and not unknown.reproduced  # not known: the stricter reading


@pytest.fixture
def repo(tmp_path):
    root = make_project(tmp_path / "proj")
    (root / ".gitignore").write_text("results/runs/\n__pycache__/\n")
    assert main(["--root", str(root), "new", "scan-gpu", "--device", "cuda"]) == 0
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "a claim")
    return root


def test_reproduce_reruns_at_the_records_commit_without_touching_the_checkout(repo, capsys):
    """A GPU claim on this CPU machine: both runs are correctness checks, so the outcome is exact."""
    assert main(["--root", str(repo), "run", str(repo / "claims/scan-gpu.yaml"), "--quiet", "--threads", "1"]) == 0
    (record,) = (repo / "results" / "runs" / "records" / "scan-gpu").glob("*.json")
    first = _git(repo, "rev-parse", "HEAD")
    (repo / "notes.txt").write_text("work in progress\n")  # the user's own state, untouched
    _git(repo, "commit", "-q", "--allow-empty", "-m", "later work")
    capsys.readouterr()
    assert main(["--root", str(repo), "reproduce", str(record), "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"reproducing scan-gpu from {record.relative_to(repo)}"
    assert out[1].startswith("  needs      CPU ") and out[2] == f"  commit     {first.strip()}"
    assert out[-1] == "reproduced: the same verdict"
    assert [ln.split()[:2] for ln in out if ln.startswith("  before") or ln.startswith("  now")] == [
        ["before", "skipped"], ["now", "skipped"]]
    assert (repo / "notes.txt").read_text() == "work in progress\n"
    assert _git(repo, "status", "--porcelain") == "?? notes.txt\n"
    assert len(_git(repo, "worktree", "list").splitlines()) == 1
    new = sorted((repo / "results" / "runs" / "records" / "scan-gpu").glob("*.json"))
    assert len(new) == 2 and {load_record(p).git_commit for p in new} == {first.strip()}


def test_reproduce_refuses_what_it_cannot_rerun(repo, tmp_path, capsys):
    assert main(["--root", str(repo), "reproduce", str(tmp_path / "none.json")]) == 2
    assert "no such record file" in capsys.readouterr().err
    rec = rk.build(rk.copy_tree(tmp_path / "fixture"), "softmax-online", kernel_us=150, baseline_us=240)
    path = tmp_path / "r.json"
    for commit, message in [("f" * 40, f"commit {'f' * 40} is not in this repository; fetch it first"),
                            (None, "names no git commit")]:
        path.write_text(json.dumps(rec.model_copy(update={"git_commit": commit}).model_dump(mode="json")))
        assert main(["--root", str(repo), "reproduce", str(path)]) == 1
        err = capsys.readouterr().err
        assert message in err and len(err.splitlines()) == 1
    head = _git(repo, "rev-parse", "HEAD").strip()
    path.write_text(json.dumps(rec.model_copy(update={"git_commit": head}).model_dump(mode="json")))
    assert main(["--root", str(repo), "reproduce", str(path)]) == 1
    assert "claims/softmax-online.yaml, kernels/stubs.py, kernels/stubs_kernel.py: differ at commit" in capsys.readouterr().err
    assert len(_git(repo, "worktree", "list").splitlines()) == 1
