"""srcgraph: the import closure, and the rule that keeps the task side from importing the kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from claimbench.gate.policy import gate_file
from claimbench.gate.srcgraph import claim_sources, import_chain, task_side_rule
from claimbench.spec.claim import Claim
from claimbench.spec.listing import parse_list
from claimbench.spec.yamlsafe import load_document

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SPLIT = FIXTURES / "kernels" / "split"


def _claim(name: str, folder: str = "valid") -> Claim:
    return Claim.model_validate(load_document(FIXTURES / "claims" / folder / f"{name}.yaml").data)


def _rule(claim: Claim, root: Path = FIXTURES) -> list[tuple[tuple, str]]:
    out: list[tuple[tuple, str]] = []
    task_side_rule(root, claim, lambda key, msg: out.append((key, msg)))
    return out


def test_chain_names_each_import_and_its_line():
    chain = import_chain(FIXTURES, SPLIT / "bad_task.py", {SPLIT / "kernel.py"})
    assert [(a.name, line, b.name) for a, line, b in chain] == [
        ("bad_task.py", 5, "helpers.py"), ("helpers.py", 3, "kernel.py")]


def test_chain_is_empty_for_the_target_itself_and_none_when_unreached():
    assert import_chain(FIXTURES, SPLIT / "kernel.py", {SPLIT / "kernel.py"}) == []
    assert import_chain(FIXTURES, SPLIT / "task.py", {SPLIT / "kernel.py"}) is None


def test_a_split_claim_passes_and_its_kernel_still_sees_the_task():
    claim = _claim("split-task-kernel")
    assert _rule(claim) == []
    assert (SPLIT / "task.py").resolve() in claim_sources(FIXTURES, claim)


def test_every_task_key_that_reaches_the_kernel_is_named():
    keys = [k for k, _ in _rule(_claim("task-imports-kernel", "invalid"))]
    assert keys == [("workload", "inputs"), ("correctness", "reference")]


@pytest.mark.parametrize("key", ["baseline.prepare", "correctness.reference"])
def test_kernel_prepare_counts_as_the_kernel_side(key):
    """A task-side key that points into the file of kernel.prepare is refused too."""
    data = load_document(FIXTURES / "claims" / "valid" / "split-task-kernel.yaml").data
    data = {**data, "kernel": {**data["kernel"], "impl": "kernels/triton_scale_kernel.py:scale",
                               "prepare": "kernels/split/kernel.py:kernel"}}
    if key == "baseline.prepare":
        data["baseline"] = {**data["baseline"], "prepare": "kernels/split/helpers.py:kernel"}
    else:
        data["correctness"] = {**data["correctness"], "reference": "kernels/split/bad_task.py:reference_fp64"}
    hits = _rule(Claim.model_validate(data))
    assert [".".join(k) for k, _ in hits] == [key]
    assert "kernels/split/kernel.py" in hits[0][1]


def test_check_reports_the_claim_line_of_the_key():
    listing = parse_list((FIXTURES / "LIST.md").read_text(encoding="utf-8"), "LIST.md")
    path = FIXTURES / "claims" / "invalid" / "baseline-in-kernel-module.yaml"
    (p,) = gate_file(path, FIXTURES, listing).problems
    assert p.key == "baseline.impl" and p.path == "claims/invalid/baseline-in-kernel-module.yaml"
    assert path.read_text().splitlines()[p.line - 1].startswith("baseline:")
    assert "kernels/<mechanism>/task.py" in p.message and "never the reverse" in p.message


@pytest.mark.parametrize("claim_id,cu", [("reduction-sum-cupy", "kernels/reduction/reduction.cu"),
                                         ("scan-lookback-cupy", "kernels/scan/scan.cu"),
                                         ("transpose-tiled-padded-cupy", "kernels/transpose/transpose.cu")])
def test_shipped_cuda_sources_are_part_of_their_claims(claim_id, cu):
    """Records hash every file a claim depends on: the .cu beside a kernel module is one of them."""
    root = FIXTURES.parents[1]
    claim = Claim.model_validate(load_document(root / "claims" / f"{claim_id}.yaml").data)
    assert (root / cu).resolve() in claim_sources(root, claim)


def test_every_shipped_claim_keeps_its_task_side_clear_of_its_kernel():
    root = FIXTURES.parents[1]
    for path in sorted((root / "claims").glob("*.yaml")):
        claim = Claim.model_validate(load_document(path).data)
        assert _rule(claim, root) == [], path.name


def test_paths_are_resolved_once_per_gate_pass_and_never_remembered_outside_one(tmp_path):
    """`check` resolved the same root and kernel files for every claim (38% of its time at 1,000
    claims); a pass remembers them, and nothing outlives the pass (a long process sees links change)."""
    from claimbench.gate.srcgraph import resolved, resolving

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    link = tmp_path / "link"
    link.symlink_to(a)
    with resolving():
        assert resolved(link) == a
        link.unlink()
        link.symlink_to(b)
        assert resolved(link) == a  # remembered within the pass
    assert resolved(link) == b  # outside a pass: resolved now


def test_named_files_are_keyed_as_the_runner_hashes_them(tmp_path):
    """A record's `source_sha256` keys are root-relative paths through symlinks (`claim_sources`);
    the files a claim names must read the same, or every honest record of a claim with a linked
    file would lack it."""
    import recordkit as rk

    from claimbench.gate.srcgraph import named_files

    root = rk.copy_tree(tmp_path / "proj")
    claim = rk.load_claim(root, "softmax-online")
    assert named_files(claim) == named_files(claim, root)
    assert named_files(claim, root) <= {p.relative_to(root.resolve()).as_posix() for p in claim_sources(root, claim)}
    real = root / "kernels" / "stubs_kernel.py"
    os.replace(real, root / "kernels" / "real_kernel.py")
    os.symlink("real_kernel.py", real)
    assert "kernels/real_kernel.py" in named_files(claim, root) and "kernels/stubs_kernel.py" in named_files(claim)
