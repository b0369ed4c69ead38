"""One claim's run as data: what the orchestrator was asked to do, and what it found.

`Job` is everything `orchestrate` needs (no callables, no open files); `ClaimRun` is everything it
observed, for the runner to decide a verdict on and write into the record.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional


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
class ClaimRun:
    """What the orchestrator observed of one claim, for the runner's verdict; ``outcome`` None means it
    ran to the end."""

    outcome: Optional[str] = None               # "error" | "timeout" | None
    outcome_reason: str = ""
    rejections: tuple[str, ...] = ()
    correctness: Optional[dict] = None
    timing: Optional[dict] = None               # PairTiming as data
    tensor_bytes: Optional[float] = None
    timed_checks: Optional[dict] = None
    bracket: Optional[dict] = None
    census: Optional[dict] = None               # threads and affinity the orchestrator saw
    load: Optional[dict] = None                 # other processes' share of the machine while timed
    torch_threads: Optional[int] = None         # what the kernel side said (evidence)
    sources: tuple[str, ...] = ()
    versions: dict = field(default_factory=dict)
    seeds: dict = field(default_factory=dict)
    output_read: str = "process_vm_readv"
    topology: Optional[dict] = None
    autotune: Optional[dict] = None
    alone: bool = False                         # it stopped where the other ranks could not know

    def to_dict(self) -> dict:
        """As plain data, for JSON: a rank process writes it and `from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ClaimRun":
        """Back from the JSON a rank process wrote; keys it does not know are dropped, sequences become tuples."""
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        for key in ("rejections", "sources"):
            if key in known:
                known[key] = tuple(known[key] or ())
        return cls(**known)


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
