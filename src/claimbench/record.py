"""The result record: one JSON file per run, written by the parent process, never by the child.

Records hold plain JSON types only, so ``publish`` and ``audit`` run without torch. They carry
``schema_version`` (their shape; older shapes are migrated on load, newer ones refused) and
``protocol_version`` (the measurement protocol; publish refuses records below the minimum).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ConfigDict, Field

from .errors import UserError
from .jsonio import loads_json
from .precision import evidence_fields
from .verdict import Evidence, Samples

SCHEMA_VERSION = 2
# 2: per-sample perturbation, CPU calls timed alone from 50 us; 3: pinned host allocator;
# 4: the judge and the clock out of the kernel's process (orchestrator, task/kernel/baseline sides),
#    CI precision and machine load part of `verified`, rounds until the CI is narrow enough
PROTOCOL_VERSION = 4
MIN_PROTOCOL_VERSION = 4


class SideTiming(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    samples_us: list[float] = Field(default_factory=list, description="Kept samples, in order.")
    rounds: list[int] = Field(default_factory=list, description="Round index of each kept sample.")
    processes: list[int] = Field(default_factory=list, description="Process index (--repeat) of each kept sample.")
    dropped_us: list[float] = Field(default_factory=list, description="Samples dropped for throttling.")
    median_us: Optional[float] = None
    iqr_us: Optional[float] = None


class Record(BaseModel):
    """One run of one claim on one machine."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    schema_version: int = Field(SCHEMA_VERSION, description="Shape of this record; migrated on load.")
    protocol_version: int = Field(PROTOCOL_VERSION, description="Measurement protocol this run followed.")
    claim_id: str
    created_utc: str = Field(description="ISO-8601 UTC time the run finished.")
    harness_version: str
    git_commit: Optional[str] = None
    git_dirty: Optional[bool] = None
    claim_sha256: str = Field(description="sha256 of the claim file.")
    claim_path: str = Field(description="The claim file, relative to the project root.")
    source_sha256: dict[str, str] = Field(default_factory=dict, description="Project files the run imported or read, relative path -> sha256.")
    seeds: list[int] = Field(default_factory=list, description="Seeds drawn for this run.")
    hardware: dict[str, Any] = Field(default_factory=dict, description="Detected hardware and software.")
    hardware_match: bool = True
    hardware_reason: str = ""
    blockers: list[str] = Field(default_factory=list, description="Why this machine cannot verify (MIG, other processes).")
    mode: str = Field("measured", description="measured (cold, publishable) | measured-hot (--hot: labelled, never published) | correctness-only (hardware did not match)")
    claimed: dict[str, Any] = Field(description="metric, value, tolerance as the claim stated them.")
    precision: dict[str, Any] = Field(default_factory=dict)
    flops: Optional[float] = None
    bytes: Optional[float] = None
    tensor_bytes: Optional[float] = Field(None, description="Total size of the actual input and output tensors.")
    protocol: dict[str, Any] = Field(default_factory=dict, description="Warm-up, flush, stop reason, drops, autotune choice.")
    correctness: dict[str, Any] = Field(default_factory=dict, description="passed, reason, per-trial errors, properties, null models.")
    rejections: list[str] = Field(default_factory=list, description="Static rules, trace, null models, changed functions.")
    outcome: Optional[str] = Field(None, description="error | timeout when the process failed.")
    outcome_reason: str = ""
    kernel: SideTiming = Field(default_factory=SideTiming)
    baseline: SideTiming = Field(default_factory=SideTiming)
    throttled_majority: bool = False
    ceilings: dict[str, Any] = Field(default_factory=dict)
    floor_us: Optional[float] = None
    floor_term: str = ""
    verdict: str
    reason: str
    value: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    published_value: Optional[float] = Field(None, description="Set only for verified.")

    def evidence(self) -> Evidence:
        """What ``decide`` needs, rebuilt from this record alone."""
        def side(t: SideTiming) -> Optional[Samples]:
            if not t.samples_us:
                return None
            procs = t.processes or [0] * len(t.samples_us)
            return Samples(t.samples_us, t.rounds, procs)
        return Evidence(
            metric=self.claimed["metric"], claimed_value=float(self.claimed["value"]),
            tolerance=float(self.claimed["tolerance"]), flops=self.flops, bytes=self.bytes,
            outcome=self.outcome, outcome_reason=self.outcome_reason, rejections=tuple(self.rejections),
            correctness_passed=self.correctness.get("passed"), correctness_reason=self.correctness.get("reason", ""),
            hardware_match=self.hardware_match, hardware_reason=self.hardware_reason,
            blockers=tuple(self.blockers), kernel=side(self.kernel), baseline=side(self.baseline),
            floor_us=self.floor_us, floor_term=self.floor_term, throttled_majority=self.throttled_majority,
            tensor_bytes=self.tensor_bytes,
            **evidence_fields(self.protocol_version, self.protocol, self.hardware, self.claimed),
        )

    @property
    def hardware_slug(self) -> str:
        return str(self.hardware.get("slug") or "unknown")


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def record_path(results: Path, rec: Record) -> Path:
    """results/records/<claim-id>/<UTC time>-<hardware slug>-<short hash>.json"""
    stamp = re.sub(r"[^0-9T]", "", rec.created_utc.split(".")[0]) + "Z"
    digest = hashlib.sha256(rec.model_dump_json().encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9-]+", "-", rec.hardware_slug.lower()).strip("-") or "unknown"
    return results / "records" / rec.claim_id / f"{stamp}-{slug}-{digest}.json"


def write_record(results: Path, rec: Record) -> Path:
    """Atomic: a temp file in the same folder, then rename; concurrent runs never clobber."""
    path = record_path(results, rec)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(rec.model_dump(mode="json"), indent=1, sort_keys=True, allow_nan=False)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(data + "\n")
            f.flush()
            os.fsync(f.fileno())
        if path.exists():  # same content hash and second: keep both, never overwrite
            path = path.with_name(path.stem + f"-{os.getpid()}.json")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _migrate_1_to_2(d: dict) -> dict:
    """Version 1 kept `status` for the verdict and no per-sample process index."""
    d = dict(d)
    if "status" in d and "verdict" not in d:
        d["verdict"] = d.pop("status")
    for side in ("kernel", "baseline"):
        t = dict(d.get(side) or {})
        if t.get("samples_us") and not t.get("processes"):
            t["processes"] = [0] * len(t["samples_us"])
        d[side] = t
    d["schema_version"] = 2
    return d


MIGRATIONS = {1: _migrate_1_to_2}


class RecordError(UserError):
    """A record that cannot be read: corrupt, truncated, or from a newer claimbench."""


def parse_record(data: Any, where: str) -> Record:
    if not isinstance(data, dict):
        raise RecordError(f"{where}: not a JSON object; a record is a mapping")
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RecordError(f"{where}: schema_version is missing or not an integer")
    if version > SCHEMA_VERSION:
        raise RecordError(f"{where}: schema_version {version} is newer than this claimbench reads ({SCHEMA_VERSION}); upgrade claimbench")
    while version < SCHEMA_VERSION:
        if version not in MIGRATIONS:
            raise RecordError(f"{where}: no migration from schema_version {version}")
        data = MIGRATIONS[version](data)
        version = data["schema_version"]
    try:
        return Record.model_validate(data)
    except Exception as e:  # pydantic.ValidationError: name the first bad field
        first = getattr(e, "errors", lambda: [{}])()[0] if hasattr(e, "errors") else {}
        loc = ".".join(str(x) for x in first.get("loc", ())) or "record"
        raise RecordError(f"{where}: {loc}: {first.get('msg', str(e))}") from None


def load_record(path: Path) -> Record:
    try:
        data = loads_json(Path(path).read_bytes())
    except (OSError, ValueError) as e:
        raise RecordError(f"{path}: cannot read record ({type(e).__name__}: {e})") from None
    return parse_record(data, str(path))
