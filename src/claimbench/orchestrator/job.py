"""One claim's run as data: what the orchestrator was asked to do, and what it found.

`Job` is everything `orchestrate` needs (no callables, no open files); `ClaimRun` is everything it
observed, for the runner to decide a verdict on and write into the record.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from claimbench.orchestrator.protocol import PairTiming

if TYPE_CHECKING:
    from pydantic import TypeAdapter


@dataclass(frozen=True)
class Job:
    """What `orchestrate` needs to run one claim: plain data only, so `job_to_dict` can hand it to rank
    processes as JSON."""

    claim: Any                      # claimbench.spec.claim.Claim (pydantic, frozen)
    root: Path
    device: str                     # where the claim runs: "cuda" | "cpu"
    dtype: str                      # the dtype it runs in (a CPU check may use check_dtype)
    measured: bool                  # False: correctness only (the hardware did not match)
    seeds: dict                     # {"trials": [...], "sensitivity": [a, b], "timing": s}
    timing: dict = field(default_factory=dict)   # TimingConfig overrides
    hot: bool = False
    hardware: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)      # backend environment for the sides
    threads: Optional[int] = None
    timeout_s: float = 900.0
    log_path: Optional[Path] = None
    max_memory_bytes: Optional[int] = None


@dataclass(frozen=True)
class Correctness:
    """The correctness trials' outcome: ``passed`` None when a rejection stopped them before a
    verdict; ``trials`` are the per-trial rows (seed, params, errors, null models) as the record keeps
    them, evidence a reader opens rather than fields the verdict reads."""

    passed: Optional[bool] = None
    reason: str = ""
    trials: tuple[dict[str, Any], ...] = ()

    def first_output_dtypes(self) -> Optional[list[str]]:
        """The dtypes the kernel returned in its first trial; None before any trial: what timed calls
        must return too (a cheaper dtype there is the cheat of issue 22)."""
        outs = (self.trials[0].get("outputs") if self.trials else None) or []
        return [o.get("dtype", "") for o in outs] or None

    def as_record(self) -> dict[str, Any]:
        """The record's `correctness` block."""
        return {"passed": self.passed, "reason": self.reason, "trials": list(self.trials)}


@dataclass(frozen=True)
class TimedChecks:
    """How many timed calls the orchestrator rechecked, how many failed, how many samples ran on
    perturbed inputs; on several ranks, the sums with each rank's own."""

    checked: int = 0
    failed: int = 0
    perturbed: int = 0
    calls_per_block: Optional[int] = None   # the kernel's calls per timed block (one process)
    ranks: tuple["TimedChecks", ...] = ()
    unperturbed: str = ""                   # why no input could change between the kernel's timed calls
    flipped: int = 0                        # of `perturbed`: edits with a dense part (signs.py), every one in protocol 6
    swept_bytes: int = 0                    # CPU: the buffer read through the caches before each sample (sweep.py)

    def as_record(self) -> dict[str, Any]:
        """The record's `protocol.timed_checks`: the keys this run has."""
        out: dict[str, Any] = {"checked": self.checked, "failed": self.failed, "perturbed": self.perturbed}
        if self.calls_per_block is not None:
            out["calls_per_block"] = self.calls_per_block
        if self.ranks:
            out["ranks"] = [r.as_record() for r in self.ranks]
        if self.unperturbed:
            out["unperturbed"] = self.unperturbed
        if self.flipped:
            out["flipped"] = self.flipped
        if self.swept_bytes:
            out["swept_bytes"] = self.swept_bytes
        return out


@dataclass(frozen=True)
class MachineLoad:
    """Other processes' share of this machine's CPUs while one process's claim was timed."""

    other_cpu_fraction: float
    cpus: int
    wall_s: float


@dataclass(frozen=True)
class SideBracket:
    """One side's timed exchanges as the orchestrator's clock saw them."""

    median_bracket_us: float
    median_side_us: float                   # what the side itself reported (evidence only)
    samples: int
    median_gap_us: Optional[float] = None   # CUDA: bracket minus the side's events


@dataclass(frozen=True)
class BracketSummary:
    """The record's `protocol.bracket`: the null calls, the CPU the sides used, each side's brackets,
    the null subtracted and the first violations. Per-side maps are keyed "kernel" and "baseline"."""

    null_us: dict[str, float] = field(default_factory=dict)
    null_iqr_us: dict[str, float] = field(default_factory=dict)
    unresolved: dict[str, int] = field(default_factory=dict)
    busy_cpu_s: dict[str, float] = field(default_factory=dict)
    busy_wall_s: dict[str, float] = field(default_factory=dict)
    idle_cpu_s: dict[str, float] = field(default_factory=dict)
    kernel: Optional[SideBracket] = None
    baseline: Optional[SideBracket] = None
    null_subtracted_us: Optional[float] = None
    null_gap_us: Optional[float] = None
    violations: tuple[str, ...] = ()
    # CUDA sides whose calls waited for the GPU inside (a host read, a nonzero): timed, never rejected
    # for it, and labelled here, since their number includes that wait (issue 23)
    synced: tuple[str, ...] = ()
    # CPU (protocol 8): the counted interrupts on the timed cores during each side's timed calls (None: a
    # count failed) and the microseconds they were counted over (`orchestrator/interrupts.py`); and the
    # refresh null calls, made after the inputs changed, per side: median_us, iqr_us, n (`orchestrator/untimed.py`)
    irq: dict[str, Optional[int]] = field(default_factory=dict)
    irq_wall_us: dict[str, float] = field(default_factory=dict)
    refresh: dict[str, dict[str, float]] = field(default_factory=dict)
    # CPU (protocol 10): how long each side's threads waited for a core in its timed calls (None: a read
    # failed) and the time that was read over (`orchestrator/runwait.py`)
    waited_us: dict[str, Optional[float]] = field(default_factory=dict)
    wait_wall_us: dict[str, float] = field(default_factory=dict)

    def side(self, role: str) -> Optional[SideBracket]:
        """``role``'s brackets; None when it was never timed."""
        return self.kernel if role == "kernel" else self.baseline

    def as_record(self) -> dict[str, Any]:
        """As the record keeps it: the keys this run has (no side, gap or null figure it never measured)."""
        out = {k: v for k, v in asdict(self).items() if v is not None}
        for role in ("kernel", "baseline"):
            if role in out:
                out[role] = {k: v for k, v in out[role].items() if v is not None}
        out["violations"] = list(self.violations)
        out.pop("synced")
        if self.synced:  # only where a side synced: other records keep their keys
            out["synced"] = list(self.synced)
        return out


@dataclass(frozen=True)
class ClaimRun:
    """What the orchestrator observed of one claim, for the runner's verdict; ``outcome`` None means it
    ran to the end. Typed to the leaves the verdict reads; ``census``, ``topology`` and ``autotune``
    are evidence blocks copied into the record as they are."""

    outcome: Optional[str] = None               # "error" | "timeout" | None
    outcome_reason: str = ""
    rejections: tuple[str, ...] = ()
    correctness: Optional[Correctness] = None
    timing: Optional[PairTiming] = None
    tensor_bytes: Optional[float] = None
    timed_checks: Optional[TimedChecks] = None
    bracket: Optional[BracketSummary] = None
    census: Optional[dict[str, Any]] = None     # threads and affinity the orchestrator saw
    load: Optional[MachineLoad] = None          # other processes' share of the machine while timed
    torch_threads: Optional[int] = None         # what the kernel side said (evidence)
    sources: tuple[str, ...] = ()
    versions: dict[str, str] = field(default_factory=dict)
    seeds: dict[str, Any] = field(default_factory=dict)
    output_read: str = "process_vm_readv"
    topology: Optional[dict[str, Any]] = None
    autotune: Optional[dict[str, Any]] = None
    alone: bool = False                         # it stopped where the other ranks could not know
    # wall seconds of this process's phases: what a claim's time budget is spent on (issue 23)
    startup_s: float = 0.0                      # the three sides spawned and loaded
    verification_s: float = 0.0                 # seed check, correctness trials, check shapes, null models
    timing_s: float = 0.0                       # warm-up and timed rounds, with their rechecks and census

    @property
    def passed(self) -> bool:
        """It ran to the end, its correctness check passed and nothing was rejected: only then may a
        next process run. A rejection already decides the verdict; more processes would only repeat it."""
        return (not self.outcome and not self.rejections and self.correctness is not None
                and self.correctness.passed is True)

    def to_dict(self) -> dict[str, Any]:
        """As plain data, for JSON: a rank process writes it and `from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ClaimRun":
        """Back from the JSON a rank process wrote, validated to its types (nested ones included);
        keys it does not know are dropped."""
        return _adapter().validate_python({k: v for k, v in d.items() if k in cls.__dataclass_fields__})


@functools.lru_cache(maxsize=1)
def _adapter() -> "TypeAdapter[ClaimRun]":
    from pydantic import TypeAdapter

    return TypeAdapter(ClaimRun)


def job_to_dict(job: Job) -> dict:
    """``job`` as JSON-ready data (the claim as its pydantic dump, paths as text), for the launcher's
    job.json; `job_from_dict` undoes it."""
    d = {k: getattr(job, k) for k in Job.__dataclass_fields__}
    d["claim"] = job.claim.model_dump(mode="json")
    d["root"] = str(job.root)
    d["log_path"] = str(job.log_path) if job.log_path else None
    return d


def job_from_dict(d: dict) -> Job:
    """The `Job` a rank process reads back from job.json, its claim validated again."""
    from claimbench.spec.claim import Claim

    return Job(**{**d, "claim": Claim.model_validate(d["claim"]), "root": Path(d["root"]),
                  "log_path": Path(d["log_path"]) if d.get("log_path") else None})
