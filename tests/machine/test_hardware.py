"""Matching claims to machines, and what blocks `verified`, on constructed Hardware objects."""

import json
from dataclasses import replace

import pytest

from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software, blockers, is_throttled, matches
from claimbench.spec.claim import HardwareSpec

CPU = CpuInfo(model="AMD EPYC 7B13", cores=2, threads_used=2, memory_bytes=16 << 30, llc_bytes=32 << 20)
SW = Software(python="3.11.7", torch="2.13.0", triton="3.9.0", cupy=None, numpy="2.0",
              claimbench="0.1.0", git_commit="abc", git_dirty=False)


def gpu(name="NVIDIA H100 80GB HBM3", cc="9.0", sms=132, index=0, **kw) -> GpuInfo:
    base = dict(index=index, name=name, uuid=f"GPU-{index:04d}", compute_capability=cc, sm_count=sms,
                l2_bytes=50 << 20, memory_bytes=80 << 30, driver_version="550.54", cuda_version="12.4",
                sm_clock_mhz=1980, mem_clock_mhz=2619, max_sm_clock_mhz=1980, throttle_reasons=0,
                temperature_c=40, power_w=100.0, power_limit_w=700.0, mig_enabled=False,
                ecc_enabled=True, other_processes=(), nvlink=False)
    base.update(kw)
    return GpuInfo(**base)


def machine(*gpus: GpuInfo) -> Hardware:
    return Hardware(device="cuda" if gpus else "cpu", gpus=tuple(gpus), cpu=CPU, software=SW)


def spec(**kw) -> HardwareSpec:
    return HardwareSpec(**{"device": "cuda", "model": ["NVIDIA H100*", "NVIDIA H200*"], **kw})


def test_cuda_claim_on_cpu_is_skipped_with_both_names():
    ok, why = matches(spec(), machine())
    assert not ok
    assert why == "needs NVIDIA H100* or NVIDIA H200*, found CPU (AMD EPYC 7B13)"


def test_matching_gpu_passes():
    assert matches(spec(compute_capability=["9.0"], sm_count=132), machine(gpu())) == (True, "")
    assert matches(spec(), machine(gpu(name="NVIDIA H200"))) == (True, "")


def test_pcie_h100_has_fewer_sms_than_claimed():
    ok, why = matches(spec(sm_count=132), machine(gpu(name="NVIDIA H100 PCIe", sms=114)))
    assert not ok and why == "needs 132 SMs, found 114"


def test_model_and_compute_capability_mismatch():
    ok, why = matches(spec(), machine(gpu(name="NVIDIA A100-SXM4-80GB", cc="8.0", sms=108)))
    assert not ok and why == "needs NVIDIA H100* or NVIDIA H200*, found NVIDIA A100-SXM4-80GB"
    ok, why = matches(spec(model=["*"], compute_capability=["9.0"]), machine(gpu(cc="8.0")))
    assert not ok and why == "needs compute capability 9.0, found 8.0"


def test_gpu_count():
    ok, why = matches(spec(count=2), machine(gpu()))
    assert not ok and why.startswith("needs 2 GPUs") and why.endswith("found 1")
    assert matches(spec(count=2), machine(gpu(), gpu(index=1)))[0]


def test_a_claim_resting_on_nvlink_needs_it_on_every_gpu_it_uses():
    """Issue 24: the 2-GPU tensor-parallel claim would have run, and been refuted, on a PCIe pair."""
    linked = machine(gpu(nvlink=True), gpu(index=1, nvlink=True))
    assert matches(spec(count=2, nvlink=True), linked) == (True, "")
    ok, why = matches(spec(count=2, nvlink=True), machine(gpu(nvlink=True), gpu(index=1, nvlink=False)))
    assert not ok and why == "needs NVLink between its GPUs, found no active NVLink (PCIe only) on GPU 1 (NVIDIA H100 80GB HBM3)"
    ok, why = matches(spec(count=2, nvlink=True), machine(gpu(nvlink=None), gpu(index=1, nvlink=True)))
    assert not ok and "no NVLink state from NVML on GPU 0" in why  # unknown is not a yes
    assert matches(spec(count=2), machine(gpu(), gpu(index=1)))[0]  # not asked: PCIe is fine
    with pytest.raises(ValueError, match="apply to cuda claims only"):
        HardwareSpec(device="cpu", model=["*"], nvlink=True)


def test_cpu_claim_matches_cpu_model_glob():
    assert matches(HardwareSpec(device="cpu", model=["AMD EPYC*"]), machine()) == (True, "")
    assert matches(HardwareSpec(device="cpu", model=["*"]), machine(gpu()))[0]
    ok, why = matches(HardwareSpec(device="cpu", model=["Intel*"]), machine())
    assert not ok and "AMD EPYC 7B13" in why


def test_blockers_mig_and_other_process():
    assert blockers(machine(gpu())) == []
    assert blockers(machine()) == []
    b = blockers(machine(gpu(mig_enabled=True)))
    assert len(b) == 1 and "MIG" in b[0]
    assert blockers(machine(gpu(other_processes=(123,)))) == ["another process (pid 123) is using GPU 0"]
    assert "pids 5, 7" in blockers(machine(gpu(other_processes=(5, 7))))[0]
    two = machine(gpu(), gpu(index=1, other_processes=(9,)))
    assert blockers(two, indices=[0]) == [] and len(blockers(two)) == 1


def test_throttle_at_detection_is_not_a_blocker():
    assert blockers(machine(gpu(throttle_reasons=0x40))) == []


@pytest.mark.parametrize("mask,throttled", [(0, False), (None, False), (0x1, False), (0x4, False),
                                            (0x8, True), (0x20, True), (0x40, True), (0x80, True),
                                            (0x1 | 0x80, True), (0x100, False)])
def test_is_throttled_bits(mask, throttled):
    assert is_throttled(mask) is throttled


def test_name_slug_and_round_trip():
    hw = machine(gpu(name="NVIDIA H200", other_processes=(3,)))
    assert hw.name == "NVIDIA H200" and hw.slug == "nvidia-h200"
    assert machine().slug == "cpu-amd-epyc-7b13" and machine().name == "AMD EPYC 7B13"
    intel = replace(machine(), cpu=replace(CPU, model="Intel(R) Xeon(R) CPU @ 2.20GHz"))
    assert intel.slug == "cpu-intel-xeon"
    assert machine(gpu(), gpu(index=1)).slug.startswith("2x-")
    d = json.loads(json.dumps(hw.to_dict()))
    assert Hardware.from_dict(d) == hw
