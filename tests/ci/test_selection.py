"""The CI selection: --require-gpu, --hardware-only and --changed-since."""

from pathlib import Path

import pytest

from claimbench.ci.selection import select, select_for_ci
from claimbench.errors import UserError
from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software
from claimbench.options import CiChoices

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "tests" / "fixtures" / "distributed"
SW = Software("3.11", None, None, None, None, None, None, None)
CPU = Hardware("cpu", (), CpuInfo("Fake CPU", 2, 2, None, None), SW)
H200 = GpuInfo(0, "NVIDIA H200", None, "9.0", 132, None, None, None, None, None, None, None, None, None, None, None, False, True)
TWO_H200 = Hardware("cuda", (H200, GpuInfo(**{**H200.__dict__, "index": 1})), CpuInfo("Fake CPU", 2, 2, None, None), SW)
NCCL = ROOT / "claims" / "nccl-allreduce-vs-reduce-broadcast.yaml"
GLOO = DIST / "claims" / "allreduce-gloo.yaml"


def test_require_gpu_refuses_a_cpu_machine_with_exit_1():
    with pytest.raises(UserError) as e:
        select([GLOO], DIST, CPU, gpu_required=True)
    assert e.value.exit_code == 1 and "no usable CUDA GPU" in str(e.value)
    assert select([NCCL], ROOT, TWO_H200, gpu_required=True) == [NCCL]


def test_hardware_only_keeps_what_the_machine_matches():
    assert select([NCCL, GLOO], ROOT, TWO_H200, hardware_only=True) == [NCCL, GLOO]  # a CPU claim (model *) matches any CPU
    assert select([NCCL, GLOO], ROOT, CPU, hardware_only=True) == [GLOO]
    one = Hardware("cuda", (H200,), CPU.cpu, SW)
    assert select([NCCL], ROOT, one, hardware_only=False) == [NCCL]
    with pytest.raises(UserError, match="none of the 1 claim"):
        select([NCCL], ROOT, one, hardware_only=True)  # count 2 on a 1-GPU machine: nothing to verify


def test_an_unparsable_claim_is_kept_by_hardware_only(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("id: [\n")
    assert select([bad], tmp_path, CPU, hardware_only=True) == [bad]


def test_select_for_ci_reads_the_choices():
    assert select_for_ci(CiChoices(), [NCCL, GLOO], ROOT, hw=CPU, hardware_only=True) == [GLOO]
    assert select_for_ci(CiChoices(), [NCCL], ROOT, hw=CPU) == [NCCL]  # nothing chosen: no filtering
