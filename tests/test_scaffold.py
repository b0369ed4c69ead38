"""`claimbench new`: the four files pass check, their test passes, and the runner's correctness
check accepts both examples; bad names and existing files are refused with one line."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claimbench.cli import main
from claimbench.gate.policy import gate_file
from claimbench.spec.project import load_listing

TESTS = Path(__file__).resolve().parent
LIST = """# A list

## Kernels

- Single-pass Parallel Prefix Scan with Decoupled Look-back - A prefix sum that reads and writes once.
- Roofline - Bounds throughput by peak rate and bandwidth.
"""


def make_project(root: Path) -> Path:
    """The smallest project `new` works in: a list, claims/, kernels/, and the kernel-test helper."""
    (root / "claims").mkdir(parents=True)
    (root / "kernels").mkdir()
    (root / "kernels" / "__init__.py").write_text("")
    (root / "tests" / "kernels").mkdir(parents=True)
    shutil.copy(TESTS / "kernels" / "kernel_claims.py", root / "tests" / "kernels" / "kernel_claims.py")
    (root / "LIST.md").write_text(LIST)
    return root


@pytest.fixture
def project(tmp_path):
    return make_project(tmp_path / "proj")


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_new_writes_a_claim_task_kernel_and_test_that_pass_check(project, capsys, device):
    assert main(["--root", str(project), "new", "scan-demo", "--device", device]) == 0
    out = capsys.readouterr().out
    files = ["claims/scan-demo.yaml", "kernels/scan_demo/task.py", "kernels/scan_demo/kernel.py",
             "tests/kernels/test_scan_demo.py"]
    assert [line.split()[1] for line in out.splitlines()[:4]] == files
    result = gate_file(project / files[0], project, load_listing(project))
    assert result.ok, result.problems
    assert result.claim.hardware.device == device and result.claim.entry.startswith("Single-pass Parallel")
    tree = ast.parse((project / files[1]).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported == {"__future__", "torch"}  # the task never reaches the kernel
    sizes = [c["rows"] * c["cols"] for c in result.claim.workload.check_params]
    assert min(sizes) >= 100, "a tiny check shape lets the lower-precision null model through by chance"
    text = (project / files[0]).read_text()
    assert "CHANGE" in text and "$" not in text.replace("$schema", "")
    assert "claimbench ingest && claimbench publish" in out


def test_new_takes_the_entry_and_the_mechanism_folder(project):
    assert main(["--root", str(project), "new", "roof-1", "--entry", "Kernels > Roofline", "--mechanism", "roof"]) == 0
    result = gate_file(project / "claims/roof-1.yaml", project, load_listing(project))
    assert result.ok and result.claim.entry == "Kernels > Roofline"
    assert result.claim.kernel.impl == "kernels/roof/kernel.py:prefix_sum"


@pytest.mark.parametrize("argv, message", [
    (["new", "Bad_Id"], "claim id 'Bad_Id': use lowercase letters"),
    (["new", "ok-id", "--entry", "No Such Entry"], "--entry: "),
    (["new", "ok-id", "--mechanism", "has-dash"], "--mechanism 'has-dash'"),
])
def test_new_refuses_bad_names_with_one_line(project, capsys, argv, message):
    assert main(["--root", str(project), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("claimbench: ") and message in err and len(err.splitlines()) == 1
    assert not list((project / "claims").iterdir()) and list((project / "kernels").iterdir()) == [project / "kernels" / "__init__.py"]


def test_new_never_overwrites(project, capsys):
    (project / "kernels" / "scan_demo").mkdir()
    (project / "kernels" / "scan_demo" / "task.py").write_text("# mine\n")
    assert main(["--root", str(project), "new", "scan-demo"]) == 2
    assert "kernels/scan_demo/task.py: already exists" in capsys.readouterr().err
    assert (project / "kernels" / "scan_demo" / "task.py").read_text() == "# mine\n"
    assert not (project / "claims" / "scan-demo.yaml").exists()


@pytest.mark.parametrize("link", ["folder", "dangling", "file"])
def test_new_never_writes_through_a_link(project, capsys, tmp_path, link):
    """`kernels/<mechanism>` a link to a folder outside: the files were written there, then removed; a
    dangling link at a file's path: a FileExistsError traceback (an adversarial review)."""
    outside = tmp_path / "outside"
    outside.mkdir()
    if link == "folder":
        (project / "kernels" / "scan_demo").symlink_to(outside, target_is_directory=True)
        shown = "kernels/scan_demo: a symbolic link"
    elif link == "dangling":
        (project / "claims" / "scan-demo.yaml").symlink_to(tmp_path / "nowhere.yaml")
        shown = "claims/scan-demo.yaml: already exists"
    else:  # a file where a folder goes: a NotADirectoryError traceback before
        (project / "kernels" / "scan_demo").write_text("mine\n")
        shown = "kernels/scan_demo: a file where `new` needs a folder"
    assert main(["--root", str(project), "new", "scan-demo"]) == 2
    err = capsys.readouterr().err
    assert shown in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert list(outside.iterdir()) == [] and not (tmp_path / "nowhere.yaml").exists()


def test_new_without_the_default_entry_asks_for_one(project, capsys):
    (project / "LIST.md").write_text("# L\n\n## S\n\n- Something - else.\n")
    assert main(["--root", str(project), "new", "scan-demo"]) == 2
    assert "name the entry your claim belongs to with --entry" in capsys.readouterr().err


def test_new_outside_a_project_names_root(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["new", "scan-demo"]) == 2
    assert "pass --root" in capsys.readouterr().err


def test_the_generated_kernel_test_passes(project):
    """Its last test shows it can fail: an exclusive scan breaks the claim's bounds."""
    assert main(["--root", str(project), "new", "scan-demo"]) == 0
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(project), os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "tests/kernels/test_scan_demo.py"], cwd=project, capture_output=True, text=True, env=env)
    assert run.returncode == 0 and "5 passed" in run.stdout, run.stdout + run.stderr


def test_the_generated_kernel_test_fails_a_kernel_returning_another_dtype(project):
    """Issue 26: the scaffolded test passed a kernel returning float64 for a float32 claim, and
    `run` then said incorrect; the test now holds the kernel to the baseline's dtype, as `run` does."""
    assert main(["--root", str(project), "new", "scan-demo"]) == 0
    kernel = next((project / "kernels").rglob("kernel.py"))
    kernel.write_text(kernel.read_text().replace("return torch.cumsum(x, dim=-1)",
                                                 "return torch.cumsum(x, dim=-1).to(torch.float64)"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(project), os.environ.get("PYTHONPATH")) if p)}
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "tests/kernels/test_scan_demo.py"], cwd=project, capture_output=True, text=True, env=env)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "the kernel returns torch.float64 where the baseline returns torch.float32" in run.stdout, run.stdout


def test_both_examples_pass_the_runners_correctness_check(project):
    """The CPU example's model is narrowed to no machine, so both take the CPU correctness path
    (trials, check shapes, null models, static rules, trace) without timing."""
    from claimbench.options import RunOptions
    from claimbench.runner import run_claims
    from claimbench.stats.status import Status

    assert main(["--root", str(project), "new", "scan-cpu"]) == 0
    assert main(["--root", str(project), "new", "scan-gpu", "--device", "cuda"]) == 0
    cpu = project / "claims" / "scan-cpu.yaml"
    cpu.write_text(cpu.read_text().replace('model: ["*"]', 'model: ["No such CPU*"]'))
    _, outcomes = run_claims([cpu, project / "claims" / "scan-gpu.yaml"], project,
                             RunOptions(results=project / "results" / "runs", threads=1))
    for o in outcomes:
        assert o.status == Status.SKIPPED and "checks passed" in o.reason, (o.claim_id, o.reason)
