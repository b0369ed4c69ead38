"""`claimbench run`'s CI options: --require-gpu, --hardware-only and --changed-since selection."""

import argparse
from pathlib import Path

import pytest

from claimbench.ci.options import add_ci_options, select, select_for_ci
from claimbench.errors import UserError
from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software

ROOT = Path(__file__).resolve().parents[2]
DIST = ROOT / "tests" / "fixtures" / "distributed"
SW = Software("3.11", None, None, None, None, None, None, None)
CPU = Hardware("cpu", (), CpuInfo("Fake CPU", 2, 2, None, None), SW)
H200 = GpuInfo(0, "NVIDIA H200", None, "9.0", 132, None, None, None, None, None, None, None, None, None, None, None, False, True)
TWO_H200 = Hardware("cuda", (H200, GpuInfo(**{**H200.__dict__, "index": 1})), CpuInfo("Fake CPU", 2, 2, None, None), SW)
NCCL = ROOT / "claims" / "nccl-allreduce-vs-reduce-broadcast.yaml"
GLOO = DIST / "claims" / "allreduce-gloo.yaml"


def test_flags_parse():
    p = argparse.ArgumentParser()
    add_ci_options(p)
    a = p.parse_args(["--changed-since", "origin/main", "--hardware-only", "--require-gpu", "--summary", "s.md"])
    assert (a.changed_since, a.hardware_only, a.require_gpu, a.summary) == ("origin/main", True, True, "s.md")
    b = p.parse_args([])
    assert (b.changed_since, b.hardware_only, b.require_gpu, b.summary) == (None, False, False, None)


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


def test_select_for_ci_reads_the_namespace():
    args = argparse.Namespace(changed_since=None, hardware_only=True, require_gpu=False)
    assert select_for_ci(args, [NCCL, GLOO], ROOT, CPU) == [GLOO]
    assert select_for_ci(argparse.Namespace(), [NCCL], ROOT, CPU) == [NCCL]  # options absent: no filtering
