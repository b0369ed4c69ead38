"""Detection on this (GPU-less) machine, the GPU path through a fake NVML, and git state."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from claimbench.machine.detect import Nvml, detect, git_state
from claimbench.machine.hardware import Hardware


def test_detect_here_is_cpu_with_model_versions_and_git(root):
    hw = detect(root)
    if hw.device == "cuda":
        pytest.skip("this machine has a usable GPU")
    assert hw.device == "cpu" and hw.gpus == ()
    assert hw.cpu.model and hw.name == hw.cpu.model
    assert hw.cpu.cores == os.cpu_count() and hw.cpu.threads_used >= 1
    assert hw.cpu.memory_bytes and hw.cpu.memory_bytes > 1 << 28
    sw = hw.software
    assert sw.python.count(".") == 2 and sw.numpy and sw.torch and sw.claimbench
    assert sw.git_commit and len(sw.git_commit) == 40
    assert Hardware.from_dict(hw.to_dict()) == hw


def test_detect_without_nvml_never_imports_torch(root):
    code = ("import sys; from pathlib import Path; from claimbench.machine.detect import detect; "
            f"hw = detect(Path({str(root)!r})); assert hw.device in ('cpu', 'cuda'); "
            "print('torch' in sys.modules, hw.device)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    if out[1] == "cpu" and Nvml.open() is None:
        assert out[0] == "False"


class FakeNvml:
    def __init__(self, n=1, pids=(), reasons=0):
        self.n, self.pids, self.reasons = n, pids, reasons

    def count(self):
        return self.n

    def sample(self, i):
        return {"sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "throttle_reasons": self.reasons,
                "temperature_c": 35, "power_w": 120.5}

    def device_info(self, i, ignore_pids=()):
        return {"name": "NVIDIA H200", "uuid": f"GPU-aaaa-{i}", "compute_capability": "9.0",
                "driver_version": "570.1", "cuda_version": "12.8", "max_sm_clock_mhz": 1980,
                "power_limit_w": 700.0, "mig_enabled": False, "ecc_enabled": True,
                "other_processes": tuple(p for p in self.pids if p not in ignore_pids),
                "nvlink": None, "memory_bytes": 150 << 30, **self.sample(i)}


def props(i):
    return {"name": "NVIDIA H200", "sm_count": 132, "l2_bytes": 60 << 20, "memory_bytes": 140 << 30,
            "compute_capability": "9.0", "uuid": f"aaaa-{i}"}


def test_gpu_path_merges_nvml_and_torch(root):
    hw = detect(root, nvml=FakeNvml(pids=(os.getpid(), 4242)), cuda_props=props)
    assert hw.device == "cuda" and hw.name == "NVIDIA H200" and hw.slug == "nvidia-h200"
    g = hw.gpus[0]
    assert (g.sm_count, g.l2_bytes, g.compute_capability) == (132, 60 << 20, "9.0")
    assert g.uuid == "GPU-aaaa-0" and g.nvml_index == 0
    assert g.memory_bytes == 140 << 30            # torch's usable memory wins over NVML's total
    assert g.other_processes == (4242,)           # our own pid is not "another process"
    assert g.power_w == 120.5 and g.sm_clock_mhz == 1980


def test_gpu_listed_but_torch_without_cuda_is_cpu(root, monkeypatch):
    import claimbench.machine.detect as d

    monkeypatch.setattr(d, "_torch_cuda_props", lambda: None)
    hw = detect(root, nvml=FakeNvml())
    assert hw.device == "cpu" and len(hw.gpus) == 1 and hw.gpus[0].sm_count is None


def test_with_gpu_false_skips_devices(root):
    assert detect(root, with_gpu=False, nvml=FakeNvml(), cuda_props=props).device == "cpu"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAIMBENCH_GIT_COMMIT", raising=False)
    monkeypatch.delenv("CLAIMBENCH_GIT_DIRTY", raising=False)
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "config", "user.email", "t@example.com")
    _git(tmp_path, "config", "user.name", "t")
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "old.json").write_text("{}")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-q", "-m", "init")
    return tmp_path


def test_git_dirty_only_outside_results(repo):
    commit, dirty = git_state(repo)
    assert len(commit) == 40 and dirty is False
    (repo / "results" / "new.json").write_text("{}")
    (repo / "results" / "old.json").write_text('{"x": 1}')
    assert git_state(repo)[1] is False
    (repo / "b.py").write_text("y = 2\n")
    assert git_state(repo)[1] is True
    (repo / "b.py").unlink()
    (repo / "a.py").write_text("x = 2\n")
    assert git_state(repo)[1] is True


def test_git_in_subdirectory_project(repo):
    sub = repo / "proj"
    (sub / "results").mkdir(parents=True)
    (sub / "results" / "r.json").write_text("{}")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "sub")
    (sub / "results" / "r2.json").write_text("{}")
    assert git_state(sub)[1] is False
    (repo / "results" / "top.json").write_text("{}")  # not the project's results/
    assert git_state(sub)[1] is True


def test_env_commit_where_git_did_not_travel(tmp_path, monkeypatch):
    monkeypatch.setenv("CLAIMBENCH_GIT_COMMIT", "f" * 40)
    monkeypatch.delenv("CLAIMBENCH_GIT_DIRTY", raising=False)
    assert git_state(tmp_path) == ("f" * 40, None)
    monkeypatch.setenv("CLAIMBENCH_GIT_DIRTY", "0")
    assert git_state(tmp_path) == ("f" * 40, False)
    sw = detect(tmp_path, with_gpu=False).software
    assert sw.git_commit == "f" * 40 and sw.git_dirty is False


def test_no_git_at_all(tmp_path, monkeypatch):
    monkeypatch.delenv("CLAIMBENCH_GIT_COMMIT", raising=False)
    monkeypatch.delenv("CLAIMBENCH_GIT_DIRTY", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert git_state(tmp_path) == (None, None)


@pytest.mark.gpu
def test_detect_on_a_gpu(root):
    hw = detect(root)
    g = hw.gpus[0]
    assert hw.device == "cuda" and g.sm_count and g.l2_bytes and g.compute_capability.count(".") == 1
    assert g.uuid and g.uuid.startswith(("GPU-", "MIG-")) and g.nvml_index is not None
    assert g.driver_version and g.max_sm_clock_mhz and os.getpid() not in g.other_processes
    assert Nvml.open().sample(g.nvml_index)["sm_clock_mhz"]


def test_nvml_reader_against_stubbed_pynvml(monkeypatch):
    """The real Nvml class over a stub with pynvml's names: fallbacks and unsupported fields."""
    import types

    import pynvml as real

    def unsupported(*a):
        raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)

    def link_state(h, link):
        if link > 1:
            raise real.NVMLError(real.NVML_ERROR_NOT_SUPPORTED)
        return 0

    stub = types.SimpleNamespace(
        NVML_CLOCK_SM=real.NVML_CLOCK_SM, NVML_CLOCK_MEM=real.NVML_CLOCK_MEM,
        NVML_TEMPERATURE_GPU=real.NVML_TEMPERATURE_GPU, NVML_NVLINK_MAX_LINKS=real.NVML_NVLINK_MAX_LINKS,
        nvmlInit=lambda: None, nvmlShutdown=lambda: None, nvmlDeviceGetCount=lambda: 1,
        nvmlDeviceGetHandleByIndex=lambda i: object(), nvmlDeviceGetName=lambda h: b"NVIDIA H200",
        nvmlDeviceGetUUID=lambda h: "GPU-1234", nvmlDeviceGetCudaComputeCapability=lambda h: (9, 0),
        nvmlSystemGetDriverVersion=lambda: "570.86", nvmlSystemGetCudaDriverVersion_v2=lambda: 12080,
        nvmlDeviceGetClockInfo=lambda h, t: 1980 if t == real.NVML_CLOCK_SM else 3201,
        nvmlDeviceGetMaxClockInfo=lambda h, t: 1980,
        nvmlDeviceGetCurrentClocksEventReasons=unsupported,            # old driver: falls back
        nvmlDeviceGetCurrentClocksThrottleReasons=lambda h: 0x41,
        nvmlDeviceGetTemperature=lambda h, s: 41, nvmlDeviceGetPowerUsage=lambda h: 123456,
        nvmlDeviceGetEnforcedPowerLimit=lambda h: 700000,
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=11), types.SimpleNamespace(pid=12)],
        nvmlDeviceGetMigMode=lambda h: [1, 1], nvmlDeviceGetEccMode=unsupported,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=141 << 30),
        nvmlDeviceGetNvLinkState=link_state)
    for name in vars(stub):
        if name.startswith("nvml") and not name.startswith("nvmlDeviceGetCurrentClocksEvent"):
            assert hasattr(real, name), f"pynvml has no {name}"
    monkeypatch.setitem(sys.modules, "pynvml", stub)
    nv = Nvml.open()
    info = nv.device_info(0, ignore_pids=(12,))
    assert info["name"] == "NVIDIA H200" and info["compute_capability"] == "9.0"
    assert info["cuda_version"] == "12.8" and info["power_w"] == 123.456 and info["power_limit_w"] == 700.0
    assert info["throttle_reasons"] == 0x41 and info["ecc_enabled"] is None and info["mig_enabled"] is True
    assert info["other_processes"] == (11,) and info["nvlink"] is False
    assert nv.sample(0) == {"sm_clock_mhz": 1980, "mem_clock_mhz": 3201, "throttle_reasons": 0x41,
                            "temperature_c": 41, "power_w": 123.456}
    assert detect(Path("."), nvml=nv, cuda_props=props).gpus[0].other_processes == (11, 12)
    hw = detect(Path("."), nvml=nv, cuda_props=props, ignore_pids=(12,))
    assert hw.gpus[0].mig_enabled and hw.gpus[0].other_processes == (11,)
