"""What `publish`, `table`, `site` and `audit` keep of one record file: its `Summary`.

A record is several kilobytes of samples and free-form blocks; deciding which numbers stand needs
only a few dozen fields of it, for 100,000 records at a time. `summarize` reduces a parsed record
to those fields (its hardware as a slug and a display name, the files that make it dirty, a digest
of what it copied from its claim); `read_summary` does the same from a file's bytes, with `error`
set instead when the file is not a readable record. The index (`store/index.py`) keeps one per line.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, NamedTuple, Optional

from claimbench.spec.display import machine_name, short_name
from claimbench.store.claimcopy import copy_digest_of
from claimbench.store.provenance import MAX_DIRTY_FILES, relevant_changes
from claimbench.store.record import Record, RecordError, normalized_utc, parse_record, read_record_bytes, record_data

_NO_SOURCES: dict = {}  # the default below, shared and never mutated


class Summary(NamedTuple):
    """What publish, table and site need from one record file, or why it cannot be read.

    A named tuple, not a dataclass: audit ships 100,000 of them between processes, and a tuple
    crosses a pipe about five times cheaper."""

    path: str  # relative to the results folder, POSIX separators
    size: int
    mtime_ns: int
    sha256: str
    claim_id: str
    error: Optional[str] = None  # set when the record is corrupt, truncated or too new
    hardware: str = ""  # slug, e.g. nvidia-h200
    hardware_name: str = ""  # short display name, e.g. H200
    created_utc: str = ""
    verdict: str = ""
    reason: str = ""
    mode: str = ""
    value: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    published_value: Optional[float] = None
    metric: str = ""
    dtype: str = ""
    protocol_version: int = 0
    floor_term: str = ""
    git_commit: Optional[str] = None
    git_dirty: Optional[bool] = None
    claim_path: str = ""
    claim_sha256: str = ""
    source_sha256: dict = _NO_SOURCES
    machine: str = ""  # what tells machines apart in the list: `2× H200`, `EPYC 7B13 (2 cores)`
    when: str = ""  # created_utc, normalized: compares as a time
    copy_sha: str = ""  # `copy_digest` of what the record copied from its claim
    dirty_files: tuple = ()  # changed files this record's number depends on (empty: clean or unknown)
    sandbox: str = ""  # protocol.sandbox: "bwrap", or "none: <why>" when the sides ran unconfined
    floor_us: Optional[float] = None  # the physics floor the number was held to; None or 0: none applied
    sweep_axis: str = ""  # a sweep point's axis: never published; "" for a record of its claim's own params
    sweep_value: Any = None  # that axis's value at the point (a params scalar)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def point(self) -> Optional[tuple[str, Any]]:
        """(axis, value) of a sweep point's record; None for the claim's own params."""
        return (self.sweep_axis, self.sweep_value) if self.sweep_axis else None


def hardware_slug(hw: dict) -> str:
    """The record's slug, or one derived like `Hardware.slug` when the runner left it out."""
    if hw.get("slug"):
        return str(hw["slug"])
    gpus = hw.get("gpus") or []
    if hw.get("device") == "cuda" and gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        base = re.sub(r"[^a-z0-9]+", "-", str(gpus[0]["name"]).lower()).strip("-")[:40]
        return f"{len(gpus)}x-{base}" if len(gpus) > 1 else base
    cpu = hw.get("cpu") or {}
    if isinstance(cpu, dict) and cpu.get("model"):
        return "cpu-" + re.sub(r"[^a-z0-9]+", "-", str(cpu["model"]).lower()).strip("-")[:40]
    return "unknown"


def hardware_name(hw: dict) -> str:
    """A short display name: `H200` for `NVIDIA H200`, the CPU model on CPU."""
    name = hw.get("name")
    gpus = hw.get("gpus") or []
    if not name and hw.get("device") == "cuda" and gpus and isinstance(gpus[0], dict):
        name = gpus[0].get("name")
        if name and len(gpus) > 1:
            name = f"{len(gpus)}× {name}"
    if not name and isinstance(hw.get("cpu"), dict):
        name = hw["cpu"].get("model")
    return short_name(str(name or hardware_slug(hw)))


def judged_dirty(rec: Record) -> tuple[Optional[bool], tuple]:
    """(dirty, the files that make it so) for this record's own number: the files the runner
    found changed, narrowed to those the claim depends on (`provenance.relevant_changes`).
    A record without that list (older runners) keeps its flag."""
    files = (rec.hardware.get("software") or {}).get("git_dirty_files") if isinstance(rec.hardware.get("software"), dict) else None
    if rec.git_commit and isinstance(files, list) and len(files) <= MAX_DIRTY_FILES and all(isinstance(f, str) for f in files):
        relevant = tuple(relevant_changes(files, rec.claim_path, rec.source_sha256))
        return bool(relevant), relevant
    return rec.git_dirty, ()


def summarize(rec: Record, rel: str, size: int, *, mtime_ns: int, sha256: str) -> Summary:
    dirty, dirty_files = judged_dirty(rec)
    return Summary(
        path=rel, size=size, mtime_ns=mtime_ns, sha256=sha256, claim_id=rec.claim_id,
        hardware=hardware_slug(rec.hardware), hardware_name=hardware_name(rec.hardware),
        created_utc=rec.created_utc, verdict=rec.verdict, reason=rec.reason, mode=rec.mode,
        value=rec.value, ci_low=rec.ci_low, ci_high=rec.ci_high, published_value=rec.published_value,
        metric=str(rec.claimed.get("metric", "")), dtype=str(rec.precision.get("dtype", "")),
        protocol_version=rec.protocol_version, floor_term=rec.floor_term, git_commit=rec.git_commit, git_dirty=dirty,
        claim_path=rec.claim_path, claim_sha256=rec.claim_sha256, source_sha256=dict(rec.source_sha256),
        machine=machine_name(rec.hardware, rec.protocol), when=normalized_utc(rec.created_utc) or "",
        copy_sha=copy_digest_of(rec), dirty_files=dirty_files,
        sandbox=str(rec.protocol.get("sandbox") or "") if isinstance(rec.protocol, dict) else "",
        floor_us=rec.floor_us, sweep_axis=rec.sweep_point.axis if rec.sweep_point else "",
        sweep_value=rec.sweep_point.value if rec.sweep_point else None)


def read_summary(full: str, rel: str, raw: Optional[bytes] = None, *, sha: Optional[str] = None,
                 st: Optional[os.stat_result] = None) -> tuple[Summary, Optional[Record]]:
    """Read one record file: its summary (with `error` set when unreadable) and the record."""
    claim_id = rel.split("/")[-2] if rel.count("/") >= 1 else ""
    try:
        if raw is None or st is None:
            raw, st = read_record_bytes(full, rel)
        sha = sha or hashlib.sha256(raw).hexdigest()
        rec = parse_record(record_data(raw, rel), rel)
    except RecordError as e:
        size, mtime = (st.st_size, st.st_mtime_ns) if st is not None else (0, 0)
        return Summary(rel, size, mtime, sha or "", claim_id, error=str(e)), None
    return summarize(rec, rel, st.st_size, mtime_ns=st.st_mtime_ns, sha256=sha), rec
