"""orchestrator/cachecheck.py: a run whose sides share their compiler caches (no Landlock) cannot
verify a claim whose baseline or task compiles, since the kernel could edit the code they load
(an adversarial review, 2026-12-06: docs/threats.md's compiled-code poisoning, closed only by
Landlock's folder per side)."""

from __future__ import annotations

import json

import pytest
from cheat_project import SOFTMAX, make_project, write_claim

from claimbench.gate.policy import gate_file
from claimbench.machine import landlock
from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.orchestrator import cachecheck
from claimbench.runner import run_one
from claimbench.stats.status import Status

NAMED = SOFTMAX.replace("impl: kernels/softmax_cpu.py:torch_softmax", "impl: kernels/softmax_named_compile.py:torch_softmax")


def test_which_sandboxes_give_each_side_its_own_caches(monkeypatch):
    assert cachecheck.roles_isolated("landlock") and not cachecheck.roles_isolated("none")
    monkeypatch.setattr(landlock, "abi", lambda: 0)
    assert not cachecheck.roles_isolated("bwrap")  # bubblewrap alone: one /tmp for the three sides
    monkeypatch.setattr(landlock, "abi", lambda: 1)
    assert cachecheck.roles_isolated("bwrap")


def test_a_baseline_file_naming_a_compiler_is_found_and_torch_alone_is_not(tmp_path):
    root = make_project(tmp_path / "p")
    named = gate_file(write_claim(root, "named", "honest", template=NAMED), root).claim
    plain = gate_file(write_claim(root, "plain", "honest"), root).claim
    assert named is not None and plain is not None
    assert cachecheck.compiling_rival(root, named, device="cpu") == "kernels/softmax_named_compile.py: torch.compile"
    assert cachecheck.compiling_rival(root, plain, device="cpu") is None
    assert cachecheck.shared_cache_blocker("landlock", root, named, device="cpu") == ""
    assert "shared their compiler caches" in cachecheck.shared_cache_blocker("none", root, named, device="cpu")
    assert cachecheck.shared_cache_blocker("none", root, plain, device="cpu") == ""


def test_triton_counts_on_a_gpu_only(tmp_path):
    """Every side of a CPU run interprets Triton (`backends.child_env`): nothing is compiled to disk, so
    a CPU claim whose baseline module imports Triton for its GPU path (the shipped GQA decode) is not
    blocked for it; on a GPU its JIT cache is shared like Inductor's."""
    root = make_project(tmp_path / "p")
    base = root / "kernels" / "softmax_triton_named.py"
    base.write_text("import torch\nimport triton  # noqa: F401  (a GPU path)\n\n\n"
                    "def torch_softmax(x):\n    return torch.softmax(x, dim=-1)\n")
    claim = gate_file(write_claim(root, "tri", "honest", template=SOFTMAX.replace(
        "impl: kernels/softmax_cpu.py:torch_softmax", "impl: kernels/softmax_triton_named.py:torch_softmax")), root).claim
    assert claim is not None
    assert cachecheck.compiling_rival(root, claim, device="cpu") is None
    assert cachecheck.compiling_rival(root, claim, device="cuda") == "kernels/softmax_triton_named.py: triton"


@pytest.mark.parametrize("sandbox", ["none", "landlock"])
def test_a_measured_run_without_landlock_keeps_such_a_number_off_the_list(tmp_path, sandbox):
    """Through the real runner: the blocker is in the record (so `audit` recomputes the same verdict),
    and a run where Landlock gives each side its caches has none."""
    if sandbox == "landlock" and landlock.abi() < 1:
        pytest.skip("this kernel has no Landlock")
    root = make_project(tmp_path / "p")
    path = write_claim(root, f"named-{sandbox}", "honest", template=NAMED, value="0.5", params="{rows: 64, cols: 256}")
    out = run_one(path, root, detect(root), opts=RunOptions(results=root / "results", threads=1, sandbox=sandbox,
                                                            timing=TimingLimits(max_time_s=0.3, warmup_s=0.05)))
    blockers = json.loads(out.record_path.read_text())["blockers"]
    shared = [b for b in blockers if "shared their compiler caches" in b]
    if sandbox == "none":
        assert shared and out.status != Status.VERIFIED, (out.status, out.reason, blockers)
    else:
        assert not shared, blockers
