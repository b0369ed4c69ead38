"""The result record: one JSON file per run, written by the parent process, never by the child.

Records hold plain JSON types only, so ``publish`` and ``audit`` run without torch. They carry
``schema_version`` (their shape; older shapes are migrated on load, newer ones refused) and
``protocol_version`` (the measurement protocol; publish refuses records below the minimum).

A record reads top-down: verdict, value and interval, the claim it copies, the machine and the
commit first; raw samples last. It copies from its claim exactly what `claimcopy.claim_copy` returns, so
audit can hold the record to the claim file whose hash it carries. Reading is capped (size,
samples) before any parsing or bootstrap, and only regular files are read: a record is evidence
someone else may have written.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional, TypeGuard

from pydantic import BaseModel, ConfigDict, Field

from claimbench.errors import UserError
from claimbench.spec.bounded import UnreadableFile, read_with_stat
from claimbench.stats.precision import evidence_fields
from claimbench.stats.verdict import Evidence, Samples
from claimbench.store.jsonio import loads_json, no_key_twice, twice_keyed
from claimbench.store.migrate import MigrationError, upgrade
from claimbench.store.recordwrite import (  # noqa: F401 (the runner's names)
    RECORD_NAME,
    TEMP_NAME,
    RecordWriteError,
    check_writable,
    keep_unwritable,
    record_json,
    record_path,
    write_record,
)
from claimbench.versions import MIN_PROTOCOL_VERSION, PROTOCOL_VERSION, SCHEMA_VERSION  # noqa: F401 (re-exported; history there)

MAX_RECORD_BYTES = 64 << 20  # a runner's record is a few MB at most; anything bigger is refused unread
MAX_SAMPLES = 100_000  # per side: 2,000 per process (timing.py) times --repeat, with room to spare
# A text field a reader is shown (a reason, a blocker) and a machine's name: the runner writes a few
# hundred characters at most. A record with a 6 MB machine name made publish and audit take 850 MB
# and a 60 MB reason made `table` take 7.5 GB (an adversarial review): such a record is refused.
MAX_TEXT = 8192
MAX_NAME = 512
METRICS = ("speedup", "time_us", "tflops", "gbps", "sol_fraction")
VERDICTS = ("verified", "refuted", "inconclusive", "incorrect", "rejected", "skipped", "error", "timeout")
CLAIM_COPY = ("claimed", "precision", "hardware_spec", "workload")
# [0-9], never \d: \d matches every Unicode digit (U+0660 sorts after "9", so a date spelled with one
# read as newer than every real one and brought back a number a later run had taken off)
_UTC = re.compile(r"^([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?(?:Z|\+00:00)$")


def normalized_utc(text: Any) -> Optional[str]:
    """`YYYY-MM-DDTHH:MM:SS.ffffffZ` for a valid ISO-8601 UTC time, else None. Normalized times
    compare as strings in time order, which is what "latest" means."""
    if text.__class__ is str and _RUNNER_UTC.fullmatch(text) and "01" <= text[5:7] <= "12" \
            and "01" <= text[8:10] <= "28" and text[11:13] <= "23" and text[14:16] <= "59" and text[17:19] <= "59":
        return text  # as the runner writes it, on a day every month has: already normal
    m = _UTC.match(text) if isinstance(text, str) else None
    if m is None:
        return None
    y, mo, d, h, mi, s, frac = m.groups()
    try:
        datetime(int(y), int(mo), int(d), int(h), int(mi), int(s))
    except ValueError:
        return None
    return f"{y}-{mo}-{d}T{h}:{mi}:{s}.{(frac or '').ljust(6, '0')}Z"


_RUNNER_UTC = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z")


class SideTiming(BaseModel):
    """One side's samples as the record keeps them: the protocol's `SideSamples` of every process, combined."""

    model_config = ConfigDict(extra="allow", frozen=True, allow_inf_nan=False)  # "NaN" and "Infinity" strings too
    median_us: Optional[float] = None
    iqr_us: Optional[float] = None
    samples_us: list[float] = Field(default_factory=list, description="Kept samples, in order.")
    rounds: list[int] = Field(default_factory=list, description="Round index of each kept sample.")
    processes: list[int] = Field(default_factory=list, description="Process index (--repeat) of each kept sample.")
    dropped_us: list[float] = Field(default_factory=list, description="Samples dropped for throttling.")


def same_value(a: Any, b: Any) -> bool:
    """Whether two params values name the same point: equal and of one type (4096 is not 4096.0,
    and True is not 1), the rule a sweep's values, a record's point and the site all match by."""
    return a == b and type(a) is type(b)


class SweepPoint(BaseModel):
    """Where on its claim's sweep axis a record was measured, when not at the claim's own params.

    A record of a sweep point is a whole record (its own processes, checks, samples and verdict),
    held by audit to the claim like any other; it is never published, since the claim's number
    stands on its params alone. The claim's own point carries none: its record is the claim's."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    axis: str = Field(description="The params name the claim sweeps.")
    value: bool | int | float | str = Field(description="That name's value at this point (one of the claim's sweep values).")

    @property
    def label(self) -> str:
        return f"{self.axis}={self.value}"


class Record(BaseModel):
    """One run of one claim on one machine. Field order is the order a reader wants.

    No float field may be NaN or infinite: JSON has no such numbers, and pydantic's lax mode would
    otherwise read the strings "NaN" and "Infinity" as them, which compare false with everything,
    skip a floor (``nan > 0``), and are written back as null by orjson, so that the same file
    judged cold, from a cache and from the index gave three answers."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    schema_version: int = Field(SCHEMA_VERSION, description="Shape of this record; migrated on load.")
    protocol_version: int = Field(PROTOCOL_VERSION, description="Measurement protocol this run followed.")
    verdict: str
    reason: str
    value: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    published_value: Optional[float] = Field(None, description="Set only for verified.")
    claim_id: str
    claim_path: str = Field(description="The claim file, relative to the project root.")
    claim_sha256: str = Field(description="sha256 of the claim file.")
    claimed: dict[str, Any] = Field(description="metric, value, tolerance as the claim stated them.")
    precision: dict[str, Any] = Field(default_factory=dict)
    hardware_spec: Optional[dict[str, Any]] = Field(None, description="The claim's hardware block (None: migrated).")
    workload: Optional[dict[str, Any]] = Field(None, description="The claim's workload block (None: migrated).")
    sweep_point: Optional[SweepPoint] = Field(
        None, description="Set on a record of a sweep point other than the claim's params (never published).")
    flops: Optional[float] = Field(None, description="At the params measured (a sweep point's own).")
    bytes: Optional[float] = Field(None, description="At the params measured (a sweep point's own).")
    hardware: dict[str, Any] = Field(default_factory=dict, description="Detected hardware and software.")
    git_commit: Optional[str] = None
    git_dirty: Optional[bool] = None
    created_utc: str = Field(description="ISO-8601 UTC time the run finished.")
    harness_version: str
    mode: str = Field("measured", description="measured (cold, publishable) | measured-hot (--hot: labelled, never published) | correctness-only (hardware did not match)")
    hardware_match: bool = True
    hardware_reason: str = ""
    blockers: list[str] = Field(default_factory=list, description="Why this machine cannot verify (MIG, other processes).")
    rejections: list[str] = Field(default_factory=list, description="Static rules, trace, null models, changed functions.")
    outcome: Optional[str] = Field(None, description="error | timeout when the process failed.")
    outcome_reason: str = ""
    correctness: dict[str, Any] = Field(default_factory=dict, description="passed, reason, per-trial errors, properties, null models.")
    throttled_majority: bool = False
    floor_us: Optional[float] = None
    floor_term: str = ""
    tensor_bytes: Optional[float] = Field(None, description="Total size of the actual input and output tensors.")
    ceilings: dict[str, Any] = Field(default_factory=dict)
    protocol: dict[str, Any] = Field(default_factory=dict, description="Warm-up, flush, stop reason, drops, autotune choice.")
    seeds: list[int] = Field(default_factory=list, description="Seeds drawn for this run.")
    source_sha256: dict[str, str] = Field(default_factory=dict, description="Project files the run imported or read, relative path -> sha256.")
    kernel: SideTiming = Field(default_factory=SideTiming)
    baseline: SideTiming = Field(default_factory=SideTiming)

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
            **evidence_fields(self.protocol_version, self.protocol, self.hardware, claimed=self.claimed),
        )

    @property
    def hardware_slug(self) -> str:
        return str(self.hardware.get("slug") or "unknown")


_VERDICTS = frozenset(VERDICTS)
_HW_TYPES = (("gpus", (list, tuple)), ("cpu", dict), ("software", dict), ("name", str), ("slug", str), ("device", str))


def _insane(r: Record) -> Optional[str]:
    """What readers rely on and the schema cannot say, checked in one pass when a record is read
    (100,000 at a time): a known verdict and metric, a valid time, the hardware block's shape,
    sample lists that line up, positive and finite times. The first problem, or None."""
    if r.verdict not in _VERDICTS:
        return f"verdict: unknown verdict {r.verdict!r}; one of {', '.join(VERDICTS)}"
    if normalized_utc(r.created_utc) is None:
        return f"created_utc: {r.created_utc!r} is not an ISO-8601 UTC time like 2026-01-01T12:00:00.000000Z"
    c = r.claimed
    value, tol = c.get("value"), c.get("tolerance")
    if c.get("metric") not in METRICS or value.__class__ not in _NUMBERS or tol.__class__ not in _NUMBERS \
            or not 0 < value < math.inf or not 0 <= tol < 1:
        return _claimed_problem(c)
    hw = r.hardware
    if hw:
        for key, kind in _HW_TYPES:  # gpus is a tuple as the runner builds it, a list once read
            v = hw.get(key)
            if v is not None and not isinstance(v, kind):
                return f"hardware: {key} has the wrong type ({type(v).__name__})"
        for g in hw.get("gpus") or ():
            if g.__class__ is not dict:
                return "hardware: gpus must be a list of mappings"
        names = [hw.get("name"), hw.get("slug"), *(hw.get("cpu") or {}).values(),
                 *(v for g in hw.get("gpus") or () for v in g.values())]
        if any(isinstance(v, str) and len(v) > MAX_NAME for v in names):
            return f"hardware: a name longer than {MAX_NAME} characters; the runner writes what the machine reports"
        # a CPU's or GPU's name, as the machine reports it, is printable ASCII: "EРYC" with a Cyrillic Р
        # looked like the EPYC it was not, and kept a forged number listed beside the real machine's
        odd = next((v for v in names if isinstance(v, str) and not (v.isascii() and v.isprintable())), None)
        if odd is not None:
            return f"hardware: the name {ascii(odd)[:80]} is not printable ASCII, as every machine reports its own"
    if (long := _long_text(r)) is not None:
        return f"{long}: longer than {MAX_TEXT} characters; more than the runner writes"
    for name, t in (("kernel", r.kernel), ("baseline", r.baseline)):
        xs = t.samples_us
        n = len(xs)
        if n > MAX_SAMPLES or len(t.dropped_us) > MAX_SAMPLES:
            return f"{name}: more than {MAX_SAMPLES} samples; more than the runner writes"
        if n and (len(t.rounds) != n or len(t.processes) != n):
            return (f"{name}: samples_us has {n} entries, rounds {len(t.rounds)}, processes "
                    f"{len(t.processes)}: each sample needs its round and process")
        if n and not (min(xs) > 0 and max(xs) < math.inf):  # round and process indices: the bootstrap checks them
            return f"{name}: samples must be positive, finite times in microseconds"
    return None


def _long_text(r: Record) -> Optional[str]:
    """The first text field a reader is shown that is longer than MAX_TEXT, or None."""
    for name in ("reason", "hardware_reason", "outcome_reason"):
        if len(getattr(r, name)) > MAX_TEXT:
            return name
    for name in ("blockers", "rejections"):
        if any(isinstance(x, str) and len(x) > MAX_TEXT for x in getattr(r, name)):
            return name
    return None


def _claimed_problem(c: dict) -> str:
    if c.get("metric") not in METRICS:  # a tuple: a list or a mapping is simply not in it
        return f"claimed: unknown metric {c.get('metric')!r}; one of {', '.join(METRICS)}"
    value = c.get("value")
    if not (_number(value) and 0 < value < math.inf):
        return f"claimed: value {value!r} is not a valid claimed value"
    return f"claimed: tolerance {c.get('tolerance')!r} is not a valid claimed tolerance"


_NUMBERS: frozenset[type[int] | type[float]] = frozenset({int, float})


def _number(x) -> TypeGuard[float]:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class RecordError(UserError):
    """A record that cannot be read: corrupt, truncated, too big, or from a newer claimbench."""


def parse_record(data: Any, where: str) -> Record:
    if not isinstance(data, dict):
        raise RecordError(f"{where}: not a JSON object; a record is a mapping")
    try:
        data = upgrade(data)
    except MigrationError as e:
        raise RecordError(f"{where}: {e}") from None
    try:
        rec = Record.model_validate(data)
    except Exception as e:  # pydantic.ValidationError: name the first bad field
        first: dict[str, Any] = getattr(e, "errors", lambda: [{}])()[0] if hasattr(e, "errors") else {}
        loc = ".".join(str(x) for x in first.get("loc", ())) or "record"
        raise RecordError(f"{where}: {loc}: {first.get('msg', str(e))}") from None
    try:
        bad = _insane(rec)
    except (TypeError, ValueError) as e:  # a value of a shape no reader expects, in a free-form block
        bad = f"record: malformed ({e})"
    if bad:
        raise RecordError(f"{where}: {bad}")
    return rec


def read_record_bytes(path: str | Path, where: Optional[str] = None) -> tuple[bytes, os.stat_result]:
    """A record file's bytes and stat, through the one bounded reader (spec/bounded.py): a regular
    file only (never a symlink, device or FIFO), up to MAX_RECORD_BYTES, checked before reading."""
    try:
        return read_with_stat(path, limit=MAX_RECORD_BYTES, what="record")
    except UnreadableFile as e:
        msg = str(e).removeprefix(str(path))
        raise RecordError(f"{where or path}{msg}") from None


def record_data(raw: bytes, where: str) -> Any:
    """A record file's bytes as JSON values, for every reader alike (the index, audit, ingest,
    `load_record`). A key twice in one object is refused, as it is in a claim: which one counts
    depends on the reader, so the file could show a person another value than the one checked."""
    try:
        data = loads_json(raw)
    except ValueError as e:  # UnicodeDecodeError and JSONDecodeError included
        raise RecordError(f"{where}: corrupt or truncated JSON ({e})") from None
    try:
        key = None if no_key_twice(raw, _without_samples(data)) else twice_keyed(raw, data)
    except ValueError as e:  # deeper than any record the runner writes
        raise RecordError(f"{where}: {e}") from None
    if key is not None:
        raise RecordError(f"{where}: {f'key {key!r}' if key else 'a key'} appears twice in one object; JSON readers "
                          "disagree on which one counts, and claimbench never writes a key twice: edited by hand?")
    return data


_SAMPLE_LISTS = ("samples_us", "rounds", "processes", "dropped_us")


def _without_samples(data: Any) -> Any:
    """``data`` with each side's sample lists replaced by 0 (shallow copies; ``data`` is untouched)."""
    if type(data) is not dict:
        return data
    out = None
    for name in ("kernel", "baseline"):
        side = data.get(name)
        if type(side) is dict:
            out = dict(data) if out is None else out
            out[name] = lean = dict(side)
            for key in _SAMPLE_LISTS:
                if key in lean:
                    lean[key] = 0
    return data if out is None else out


def load_record(path: Path) -> Record:
    raw, _ = read_record_bytes(path)
    return parse_record(record_data(raw, str(path)), str(path))
