"""What machine a number came from, and whether a claim may be verified on it.

Data only: this module never touches a device (no torch, no pynvml), so the record, publish and
audit layers can read hardware descriptions anywhere. `detect.py` fills these in.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import TYPE_CHECKING, Any, Iterable, Optional

from claimbench.spec.modelglob import glob_any

if TYPE_CHECKING:  # only for the annotation; claim.py is pydantic, which is fine in the data layer
    from claimbench.spec.claim import HardwareSpec

# NVML clock-event bits that mean the clocks were really held down (nvml.h,
# nvmlClocksEventReason*). GPU idle (0x1), application clocks (0x2), SW power cap (0x4) and sync
# boost (0x10) are not counted: they are normal states of a busy, healthy GPU.
HW_SLOWDOWN = 0x8
SW_THERMAL_SLOWDOWN = 0x20
HW_THERMAL_SLOWDOWN = 0x40
HW_POWER_BRAKE_SLOWDOWN = 0x80
THROTTLE_MASK = HW_SLOWDOWN | SW_THERMAL_SLOWDOWN | HW_THERMAL_SLOWDOWN | HW_POWER_BRAKE_SLOWDOWN


@dataclass(frozen=True)
class GpuInfo:
    """One CUDA device as seen at detection time (clocks and temperature are a snapshot)."""

    index: int
    name: str
    uuid: Optional[str]
    compute_capability: Optional[str]
    sm_count: Optional[int]
    l2_bytes: Optional[int]
    memory_bytes: Optional[int]
    driver_version: Optional[str]
    cuda_version: Optional[str]
    sm_clock_mhz: Optional[int]
    mem_clock_mhz: Optional[int]
    max_sm_clock_mhz: Optional[int]
    throttle_reasons: Optional[int]
    temperature_c: Optional[int]
    power_w: Optional[float]
    power_limit_w: Optional[float]
    mig_enabled: Optional[bool]
    ecc_enabled: Optional[bool]
    other_processes: tuple[int, ...] = ()
    nvlink: Optional[bool] = None
    nvml_index: Optional[int] = None  # NVML's numbering, which ignores CUDA_VISIBLE_DEVICES


@dataclass(frozen=True)
class CpuInfo:
    model: str
    cores: int
    threads_used: int
    memory_bytes: Optional[int]
    llc_bytes: Optional[int]


@dataclass(frozen=True)
class Software:
    python: str
    torch: Optional[str]
    triton: Optional[str]
    cupy: Optional[str]
    numpy: Optional[str]
    claimbench: Optional[str]
    git_commit: Optional[str]
    git_dirty: Optional[bool]
    cuda_runtime: Optional[str] = None  # torch.version.cuda, when torch was imported anyway
    git_dirty_files: Optional[tuple[str, ...]] = None  # what differs from the commit (provenance.tree_changes)


@dataclass(frozen=True)
class Hardware:
    device: str  # "cuda" | "cpu"
    gpus: tuple[GpuInfo, ...]
    cpu: CpuInfo
    software: Software

    @property
    def name(self) -> str:
        """The device a number is about: GPU 0's name on CUDA, else the CPU model."""
        if self.device == "cuda" and self.gpus:
            return self.gpus[0].name
        return self.cpu.model

    @property
    def slug(self) -> str:
        """Short, filesystem-safe machine label for record file names."""
        if self.device == "cuda" and self.gpus:
            base = _slugify(self.gpus[0].name)
            return f"{len(self.gpus)}x-{base}" if len(self.gpus) > 1 else base
        model = re.sub(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|@.*$", " ", self.cpu.model)
        return "cpu-" + (_slugify(model) or "unknown")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Hardware":
        gpus = tuple(_build(GpuInfo, g) for g in d.get("gpus", ()))
        return cls(device=d["device"], gpus=gpus, cpu=_build(CpuInfo, d["cpu"]),
                   software=_build(Software, d["software"]))


def _build(cls, d: dict[str, Any]):
    known = {f.name for f in fields(cls)}
    kw = {k: v for k, v in d.items() if k in known}
    if "other_processes" in kw:
        kw["other_processes"] = tuple(kw["other_processes"] or ())
    return cls(**kw)


def _slugify(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:limit].rstrip("-")


def _describe_found(hw: Hardware) -> str:
    if hw.device == "cuda" and hw.gpus:
        return hw.gpus[0].name
    return f"CPU ({hw.cpu.model})"


def matches(spec: "HardwareSpec", hw: Hardware) -> tuple[bool, str]:
    """Does this machine satisfy the claim's hardware? (True, "") or (False, why not)."""
    wanted = " or ".join(spec.model)
    if spec.device == "cpu":
        if not glob_any(spec.model, hw.cpu.model):
            return False, f"needs CPU {wanted}, found CPU ({hw.cpu.model})"
        return True, ""

    if hw.device != "cuda" or not hw.gpus:
        what = "a CUDA GPU" if spec.model == ["*"] else wanted
        return False, f"needs {what}, found {_describe_found(hw)}"
    fitting = [g for g in hw.gpus if glob_any(spec.model, g.name)]
    if not fitting:
        return False, f"needs {wanted}, found {hw.gpus[0].name}"
    per_node = spec.count // max(1, getattr(spec, "nodes", 1))
    if len(fitting) < per_node:
        return False, f"needs {per_node} GPUs ({wanted}) on this machine, found {len(fitting)}"
    gpu = fitting[0]
    if spec.compute_capability and gpu.compute_capability not in spec.compute_capability:
        return False, (f"needs compute capability {' or '.join(spec.compute_capability)}, "
                       f"found {gpu.compute_capability or 'unknown'}")
    if spec.sm_count is not None and gpu.sm_count != spec.sm_count:
        found = "unknown" if gpu.sm_count is None else str(gpu.sm_count)
        return False, f"needs {spec.sm_count} SMs, found {found}"
    if spec.nvlink:  # each GPU the ranks take must have a link up; NVML not saying is not a yes
        for g in fitting[:per_node]:
            if g.nvlink is not True:
                state = "no active NVLink (PCIe only)" if g.nvlink is False else "no NVLink state from NVML"
                return False, f"needs NVLink between its GPUs, found {state} on GPU {g.index} ({g.name})"
    return True, ""


def blockers(hw: Hardware, indices: Optional[Iterable[int]] = None) -> list[str]:
    """Conditions that forbid `verified` on this machine: a MIG slice, or a shared GPU.

    Throttling seen at detection time is not a blocker: timing drops throttled samples itself.
    `indices` limits the check to the GPUs a claim uses (default: all detected).
    """
    if hw.device != "cuda":
        return []
    wanted = None if indices is None else set(indices)
    out: list[str] = []
    for g in hw.gpus:
        if wanted is not None and g.index not in wanted:
            continue
        if g.mig_enabled:
            out.append(f"GPU {g.index} ({g.name}) is in MIG mode: a slice, not the whole GPU")
        pids = tuple(g.other_processes)
        if len(pids) == 1:
            out.append(f"another process (pid {pids[0]}) is using GPU {g.index}")
        elif pids:
            listed = ", ".join(str(p) for p in pids)
            out.append(f"other processes (pids {listed}) are using GPU {g.index}")
    return out


def is_throttled(reasons: Optional[int]) -> bool:
    """True when an NVML clock-event bitmask shows real throttling (see THROTTLE_MASK)."""
    if not reasons:
        return False
    return bool(int(reasons) & THROTTLE_MASK)
