"""Stage 1: find out what machine this is, without trusting any label.

Every probe is guarded: a missing NVML, a CPU-only torch, an unsupported NVML field or a tree
without .git yields None for that field, never an exception. NVML is read before torch touches
CUDA, so this process is not yet on the GPU when other processes are listed.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Optional

from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class Nvml:
    """A thin reader over pynvml; `sample(index)` is cheap enough to call around every sample."""

    def __init__(self) -> None:
        import pynvml

        pynvml.nvmlInit()
        self._nv = pynvml
        self._handles: dict[int, Any] = {}

    @classmethod
    def open(cls) -> Optional["Nvml"]:
        try:
            return cls()
        except Exception:
            return None

    def close(self) -> None:
        try:
            self._nv.nvmlShutdown()
        except Exception:
            pass

    def count(self) -> int:
        return int(self._nv.nvmlDeviceGetCount())

    def _handle(self, index: int):
        if index not in self._handles:
            self._handles[index] = self._nv.nvmlDeviceGetHandleByIndex(index)
        return self._handles[index]

    def _try(self, fn: Callable, *args, default=None):
        try:
            return fn(*args)
        except Exception:  # NVMLError for unsupported fields; be equally quiet about the rest
            return default

    def _reasons(self, h) -> Optional[int]:
        nv = self._nv
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            fn = getattr(nv, name, None)
            if fn is not None:
                v = self._try(fn, h)
                if v is not None:
                    return int(v)
        return None

    def sample(self, index: int) -> dict[str, Any]:
        """Clocks, throttle bitmask, temperature and power now: read around every timing sample."""
        nv, h = self._nv, self._handle(index)
        power_mw = self._try(nv.nvmlDeviceGetPowerUsage, h)
        return {
            "sm_clock_mhz": self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
            "mem_clock_mhz": self._try(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM),
            "throttle_reasons": self._reasons(h),
            "temperature_c": self._try(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
            "power_w": None if power_mw is None else power_mw / 1000.0,
        }

    def _nvlink(self, h) -> Optional[bool]:
        nv = self._nv
        seen = False
        for link in range(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18)):
            state = self._try(nv.nvmlDeviceGetNvLinkState, h, link)
            if state is None:
                break
            seen = True
            if state:
                return True
        return False if seen else None

    def device_info(self, index: int, *, ignore_pids: tuple[int, ...] = ()) -> dict[str, Any]:
        """The static description of one device, plus a `sample()` snapshot."""
        nv, h = self._nv, self._handle(index)
        cc = self._try(nv.nvmlDeviceGetCudaComputeCapability, h)
        cuda = self._try(nv.nvmlSystemGetCudaDriverVersion_v2)
        limit_mw = self._try(nv.nvmlDeviceGetEnforcedPowerLimit, h)
        mig = self._try(nv.nvmlDeviceGetMigMode, h)
        ecc = self._try(nv.nvmlDeviceGetEccMode, h)
        procs = self._try(nv.nvmlDeviceGetComputeRunningProcesses, h, default=[]) or []
        mem = self._try(nv.nvmlDeviceGetMemoryInfo, h)
        name = self._try(nv.nvmlDeviceGetName, h)
        uuid = self._try(nv.nvmlDeviceGetUUID, h)
        driver = self._try(nv.nvmlSystemGetDriverVersion)
        return {
            "name": None if name is None else _text(name),
            "uuid": None if uuid is None else _text(uuid),
            "compute_capability": None if cc is None else f"{cc[0]}.{cc[1]}",
            "driver_version": None if driver is None else _text(driver),
            "cuda_version": None if cuda is None else f"{cuda // 1000}.{(cuda % 1000) // 10}",
            "max_sm_clock_mhz": self._try(nv.nvmlDeviceGetMaxClockInfo, h, nv.NVML_CLOCK_SM),
            "power_limit_w": None if limit_mw is None else limit_mw / 1000.0,
            "mig_enabled": None if mig is None else bool(mig[0]),
            "ecc_enabled": None if ecc is None else bool(ecc[0]),
            "other_processes": tuple(sorted({int(p.pid) for p in procs} - set(ignore_pids))),
            "nvlink": self._nvlink(h),
            "memory_bytes": None if mem is None else int(mem.total),
            **self.sample(index),
        }


def _torch_cuda_props() -> Optional[Callable[[int], dict[str, Any]]]:
    """Per-device torch properties, or None when torch has no usable CUDA (the caller only asks
    once NVML has found a GPU, so a CPU machine never imports torch here)."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
    except Exception:
        return None

    def props(i: int) -> dict[str, Any]:
        p = torch.cuda.get_device_properties(i)
        return {"name": p.name, "sm_count": int(p.multi_processor_count),
                "l2_bytes": int(getattr(p, "L2_cache_size", 0)) or None,
                "memory_bytes": int(p.total_memory),
                "compute_capability": f"{p.major}.{p.minor}",
                "uuid": str(getattr(p, "uuid", "")) or None}

    props.count = torch.cuda.device_count()  # type: ignore[attr-defined]
    return props


def _norm_uuid(u: Optional[str]) -> str:
    return re.sub(r"^(gpu|mig)-", "", (u or "").lower())


def _gpus(nvml, props, ignore_pids: tuple[int, ...]) -> tuple[GpuInfo, ...]:
    n_nvml = nvml.count() if nvml is not None else 0
    infos = [nvml.device_info(i, ignore_pids=ignore_pids) for i in range(n_nvml)]
    n = getattr(props, "count", n_nvml) if props is not None else n_nvml
    out = []
    for i in range(n):
        tp = props(i) if props is not None else {}
        # Map torch's index (after CUDA_VISIBLE_DEVICES) to NVML's by UUID, else by position.
        j = next((k for k, d in enumerate(infos) if tp.get("uuid") and _norm_uuid(d["uuid"]) == _norm_uuid(tp["uuid"])),
                 i if i < len(infos) else None)
        nv = dict(infos[j]) if j is not None else {}
        merged = {**nv, **{k: v for k, v in tp.items() if v is not None}}
        if nv.get("uuid"):
            merged["uuid"] = nv["uuid"]  # NVML's spelling, "GPU-...", is the stable cache key
        out.append(GpuInfo(
            index=i, name=merged.get("name") or "unknown GPU", uuid=merged.get("uuid"),
            compute_capability=merged.get("compute_capability"), sm_count=merged.get("sm_count"),
            l2_bytes=merged.get("l2_bytes"), memory_bytes=merged.get("memory_bytes"),
            driver_version=merged.get("driver_version"), cuda_version=merged.get("cuda_version"),
            sm_clock_mhz=merged.get("sm_clock_mhz"), mem_clock_mhz=merged.get("mem_clock_mhz"),
            max_sm_clock_mhz=merged.get("max_sm_clock_mhz"), throttle_reasons=merged.get("throttle_reasons"),
            temperature_c=merged.get("temperature_c"), power_w=merged.get("power_w"),
            power_limit_w=merged.get("power_limit_w"), mig_enabled=merged.get("mig_enabled"),
            ecc_enabled=merged.get("ecc_enabled"), other_processes=tuple(merged.get("other_processes", ())),
            nvlink=merged.get("nvlink"), nvml_index=j))
    return tuple(out)


def _size(text: str) -> Optional[int]:
    m = re.match(r"\s*(\d+)\s*([KMG]?)", text, re.I)
    if not m:
        return None
    return int(m.group(1)) * {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[m.group(2).upper()]


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def detect_cpu() -> CpuInfo:
    m = re.search(r"^model name\s*:\s*(.+)$", _read("/proc/cpuinfo"), re.M)
    model = (m.group(1).strip() if m else "") or platform.processor() or platform.machine() or "unknown CPU"
    mem = re.search(r"^MemTotal:\s*(\d+)\s*kB", _read("/proc/meminfo"), re.M)
    caches = [_size(_read(str(p / "size"))) for p in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")]
    cores = os.cpu_count() or 1
    threads = cores
    if "torch" in sys.modules:
        try:
            threads = int(sys.modules["torch"].get_num_threads())
        except Exception:
            pass
    return CpuInfo(model=model, cores=cores, threads_used=threads,
                   memory_bytes=int(mem.group(1)) * 1024 if mem else None,
                   llc_bytes=max((c for c in caches if c), default=None))


def _version(*dists: str) -> Optional[str]:
    for d in dists:
        try:
            return metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    return None


def _git(root: Path, *args: str) -> Optional[str]:
    try:
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def git_state(root: Path) -> tuple[Optional[str], Optional[bool]]:
    """(commit, dirty); see `git_tree`."""
    return git_tree(root)[:2]


def git_tree(root: Path) -> tuple[Optional[str], Optional[bool], Optional[tuple[str, ...]]]:
    """(commit, dirty, the changed files); what counts as a change is `provenance.tree_changes`
    (the list, publish's temp files and new records never do).

    CLAIMBENCH_GIT_COMMIT (and optionally CLAIMBENCH_GIT_DIRTY=0/1) stand in where .git did not
    travel with the tree; a real repository still decides dirtiness when one is present.
    """
    from claimbench.store.provenance import MAX_DIRTY_FILES, tree_changes

    env_commit = os.environ.get("CLAIMBENCH_GIT_COMMIT") or None
    env_dirty = os.environ.get("CLAIMBENCH_GIT_DIRTY")
    head = _git(root, "rev-parse", "HEAD")
    commit = env_commit or (head.strip() if head else None)
    files = tree_changes(root) if head else None
    if files is None:
        return commit, (None if env_dirty is None else env_dirty.strip() not in ("", "0", "false")), None
    return commit, bool(files), tuple(files) if len(files) <= MAX_DIRTY_FILES else None


def detect_software(root: Path) -> Software:
    import claimbench

    commit, dirty, files = git_tree(root)
    torch_mod = sys.modules.get("torch")
    cuda_rt = getattr(getattr(torch_mod, "version", None), "cuda", None) if torch_mod else None
    return Software(
        python=platform.python_version(), torch=_version("torch"), triton=_version("triton"),
        cupy=_version("cupy-cuda13x", "cupy-cuda12x", "cupy-cuda11x", "cupy"), numpy=_version("numpy"),
        claimbench=_version("claimbench") or getattr(claimbench, "__version__", None),
        git_commit=commit, git_dirty=dirty, cuda_runtime=cuda_rt, git_dirty_files=files)


def detect(root: Path, *, with_gpu: bool = True, nvml: Any = None,
           cuda_props: Optional[Callable[[int], dict]] = None,
           ignore_pids: tuple[int, ...] = ()) -> Hardware:
    """Describe this machine. `nvml` / `cuda_props` replace the real readers in tests.

    The device is "cuda" only when torch can run on a GPU that NVML (or torch) reports.
    `ignore_pids` are processes of this run (besides our own) that may hold the GPU.
    """
    gpus: tuple[GpuInfo, ...] = ()
    if with_gpu:
        own = nvml is None
        reader = nvml if nvml is not None else Nvml.open()
        try:
            n = reader.count() if reader is not None else 0
            props = cuda_props
            if props is None and n > 0:  # no NVML or no GPU: torch is not even imported
                props = _torch_cuda_props()
            if n > 0:
                gpus = _gpus(reader, props, (os.getpid(), *ignore_pids))
            usable = props is not None and len(gpus) > 0
        except Exception:
            gpus, usable = (), False
        finally:
            if own and reader is not None:
                reader.close()
        device = "cuda" if usable else "cpu"
    else:
        device = "cpu"
    return Hardware(device=device, gpus=gpus, cpu=detect_cpu(), software=detect_software(root))
