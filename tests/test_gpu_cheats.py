"""GPU-side cheats, kept from `verified` through the real runner on a CUDA device.

Like test_runner_cheats.py, each case writes a claim into a temporary project (a copy of
tests/fixtures) and runs it with `run_one`. The cases need what only a GPU has: the caching
allocator, streams, CUDA events, and L2 persistence. An honest kernel runs first as the control:
if it does not verify, the refusals below prove nothing. scripts/gpu_check.py's `cheats` stage
runs these same cases (and, in its CPU rehearsal, those marked `cpu_ok`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import cheat_project
import pytest
from cheat_project import FIXTURES, HEAD, SOFTMAX, make_project

from claimbench.stats.status import Status

# Claims 5000 GB/s for a 32 MB row sum: more than HBM can deliver (H200 datasheet 4.8 TB/s,
# 4.3 TB/s measured copy), so only an input read from L2 could reach it.
L2_PERSIST = HEAD + """\
workload:
  inputs: kernels/cheat/gpu_l2_task.py:make_inputs
  params: {params}
  check_params: [{{rows: 3, cols: 17}}, {{rows: 1, cols: 5}}]
  bytes: "4 * rows * cols + 4 * rows"
  memory: {{operands_bytes: "rows * cols * itemsize", output_elements: "rows", reference_bytes: "rows * cols * 8"}}
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.sum, impl: kernels/cheat/gpu_l2_task.py:baseline}}
correctness:
  method: allclose
  reference: kernels/cheat/gpu_l2_task.py:reference_fp64
  max_rel_l2: 1.0e-5
  rtol: 1.0e-5
  atol: 1.0e-6
  trials: 2
claimed: {{metric: gbps, value: 5000, tolerance: 0.05}}
"""


@dataclass(frozen=True)
class Case:
    file: str
    template: str
    allowed: frozenset          # statuses it may end in
    words: tuple = ()           # the reason must contain one of these (none: any reason)
    gpu_params: str = "{rows: 2048, cols: 4096}"
    cpu_ok: bool = False        # meaningful on a CPU too (the rehearsal runs it there)
    cpu_params: str = "{rows: 64, cols: 250}"


CASES = {
    "honest": Case("honest", SOFTMAX, frozenset({Status.VERIFIED}), cpu_ok=True),
    "gpu_empty_like": Case("gpu_empty_like", SOFTMAX, frozenset({Status.INCORRECT, Status.REJECTED}), cpu_ok=True),
    "gpu_side_stream": Case("gpu_side_stream", SOFTMAX, frozenset({Status.REJECTED, Status.INCORRECT}),
                            ("outside the timed events", "wrong answers")),
    "gpu_data_ptr_cache": Case("gpu_data_ptr_cache", SOFTMAX, frozenset({Status.REJECTED, Status.INCORRECT}), cpu_ok=True),
    "gpu_l2_persist": Case("gpu_l2_persist", L2_PERSIST, frozenset({Status.REFUTED, Status.INCONCLUSIVE}),
                           gpu_params="{rows: 4096, cols: 2048}"),
    # a control, not a cheat: a call that synchronizes inside is timed, never rejected (issue 23)
    "gpu_honest_sync": Case("gpu_honest_sync", SOFTMAX,
                            frozenset({Status.VERIFIED, Status.INCONCLUSIVE, Status.REFUTED}), cpu_ok=True),
}


def write_claim(project: Path, name: str, device: str) -> Path:
    c = CASES[name]
    cid = f"{name.replace('_', '-')}-{device}"
    params = c.gpu_params if device == "cuda" else c.cpu_params
    return cheat_project.write_claim(project, cid, c.file, template=c.template, title="GPU cheat fixture",
                                     device=device, params=params)


def run_case(project: Path, hw, name: str, device: str, results: Path, *, timeout_s: float = 180.0,
             max_time_s: float = 0.5, warmup_s: float = 0.2, repeat: int | None = None):
    from claimbench.options import RunOptions, TimingLimits
    from claimbench.runner import run_one
    opts = RunOptions(results=results, timeout_s=timeout_s, repeat=repeat,
                      timing=TimingLimits(max_time_s=max_time_s, warmup_s=warmup_s))
    return run_one(write_claim(project, name, device), project, hw, opts=opts)


def judge(name: str, outcome) -> tuple[bool, str]:
    """Did the case end where it must? (the control must verify; no cheat may)."""
    c = CASES[name]
    if outcome.status not in c.allowed:
        want = "/".join(sorted(s.value for s in c.allowed))
        return False, f"ended {outcome.status.value}, expected {want}: {outcome.reason[:300]}"
    if c.words and not any(w in outcome.reason for w in c.words):
        return False, f"{outcome.status.value} for another reason than {c.words}: {outcome.reason[:300]}"
    return True, f"{outcome.status.value}: {outcome.reason[:200]}"


def l2_window_api() -> tuple[bool, str]:
    import importlib.util
    spec = importlib.util.spec_from_file_location("gpu_l2_persist", FIXTURES / "kernels" / "cheat" / "gpu_l2_persist.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.window_api()


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return make_project(tmp_path_factory.mktemp("gpuproj"))


@pytest.fixture(scope="module")
def hw(project):
    from claimbench.machine.detect import detect
    return detect(project)


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(CASES))
def test_gpu_cheat_is_never_verified(project, hw, name):
    from claimbench.machine.hardware import blockers
    if hw.device != "cuda":
        pytest.skip("claimbench detected no CUDA device")
    if name == "honest" and blockers(hw):
        pytest.skip(f"the control cannot verify here: {'; '.join(blockers(hw))}")
    if name == "gpu_l2_persist":
        ok, why = l2_window_api()
        if not ok:
            pytest.skip(f"access-policy window not settable: {why}")
    out = run_case(project, hw, name, "cuda", project / "results")
    ok, why = judge(name, out)
    assert ok, why
    if name not in ("honest", "gpu_honest_sync"):
        assert out.status != Status.VERIFIED


@pytest.mark.parametrize("device", ["cuda", "cpu"])
@pytest.mark.parametrize("name", list(CASES))
def test_gpu_cheat_claims_pass_the_policy(project, name, device):
    """Without a GPU: every case's claim is well-formed, so on the GPU a refusal comes from the
    run, never from a malformed fixture."""
    from claimbench.gate.policy import gate_file
    from claimbench.spec.project import load_listing
    path = write_claim(project, name, device)
    res = gate_file(path, project, load_listing(project))
    assert res.ok, [str(p) for p in res.problems]
