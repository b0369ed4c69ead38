"""A sidecar summary of every record, so `publish` and `table` need not parse 100,000 JSON files.

`results/index.jsonl` holds one line per record: where it is, what it says (claim, hardware,
machine, time, verdict, value, CI, the hashes that decide whether it is current, a digest of what
it copied from its claim, the changed files it depends on) and the file's size, mtime and sha256. The runner appends a line after each `write_record`. The index is only a
cache: `read_index` checks every line against the record files on disk (size and mtime), reads
again any record that is new or changed, drops lines whose file is gone, and rewrites the index
when it had to repair it (a read-only results folder only skips that). `audit` never trusts it;
it reads every record itself, and `publish` re-reads every record it shows.

Only what the runner writes is read: `results/records/<claim id>/<runner's file name>`, regular
files, no symlinks followed, none over the size cap. Everything else there is a stray that audit
reports (`scan_tree`).
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
import tempfile
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Optional

from claimbench.spec.display import machine_name, short_name
from claimbench.store.claimcopy import copy_digest_of
from claimbench.store.jsonio import dumps_json_line, loads_json
from claimbench.store.provenance import MAX_DIRTY_FILES, relevant_changes
from claimbench.store.record import (
    RECORD_NAME,
    TEMP_NAME,
    Record,
    RecordError,
    normalized_utc,
    parse_record,
    read_record_bytes,
    record_data,
)
from claimbench.store.recordwrite import NOT_A_RECORD_NAME
from claimbench.versions import INDEX_VERSION  # its history is there

INDEX_NAME = "index.jsonl"
CLAIM_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_RECORD_MATCH = RECORD_NAME.match
_PARALLEL_MIN = 2000  # below this, worker start-up costs more than it saves


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


_FIELDS = Summary._fields


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


def scan_tree(results: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(records, strays) under results/records: records as (path relative to results, full
    path), sorted; strays as (path relative to results, why it is not read). Strings, not
    Paths, because this runs over 100,000 files on every publish. Symlinks are never followed;
    temp files of a write in progress (or killed) are neither records nor strays."""
    base = os.path.join(results, "records")
    if not os.path.isdir(base):
        return [], []
    out, strays = [], []
    for d in sorted(os.scandir(base), key=lambda e: e.name):
        rel_d = f"records/{d.name}"
        if d.is_symlink():
            strays.append((rel_d, "a symlink; claimbench does not follow links out of results/"))
        elif not d.is_dir(follow_symlinks=False):
            if not TEMP_NAME.match(d.name):
                strays.append((rel_d, "a file outside any claim folder; records live in records/<claim id>/"))
        elif not CLAIM_ID.match(d.name):
            strays.append((rel_d, "not a claim id (lowercase letters, digits, '.', '_', '-'); its files are not read"))
        else:
            names = []
            for f in os.scandir(d.path):
                name = f.name
                if _RECORD_MATCH(name) and f.is_file(follow_symlinks=False):
                    names.append(name)
                elif f.is_symlink():
                    strays.append((f"{rel_d}/{name}", "a symlink; claimbench does not follow links out of results/"))
                elif not TEMP_NAME.match(name):
                    strays.append((f"{rel_d}/{name}", NOT_A_RECORD_NAME))
            names.sort()
            rel_p, full_p = rel_d + "/", d.path + "/"
            out += [(rel_p + n, full_p + n) for n in names]
    return out, sorted(strays)


def scan_records(results: Path) -> list[tuple[str, str]]:
    """(path relative to results, full path) of every record file, sorted (see `scan_tree`)."""
    return scan_tree(results)[0]


def record_files(results: Path) -> list[Path]:
    """Every record file: results/records/<claim-id>/<runner's name>.json, sorted."""
    return [Path(full) for _, full in scan_records(Path(results))]


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


def _summary_of(args: tuple[str, str]) -> Summary:
    return read_summary(args[0], args[1])[0]


def read_bytes_and_stat(full: str, rel: Optional[str] = None) -> tuple[bytes, os.stat_result]:
    """A record file's bytes and stat through one descriptor (`record.read_record_bytes`: regular
    files under the size cap only; raises RecordError)."""
    return read_record_bytes(full, rel)


def append_index(results: Path, path: Path, rec: Record) -> Summary:
    """Add one record to the index; the runner calls this right after `write_record`.

    One `write` of one line in append mode, so concurrent runners do not interleave lines; a
    line lost anyway (crash, race with a repair) is rebuilt by the next `read_index`.
    """
    results = Path(results)
    st = os.stat(path)
    raw = Path(path).read_bytes()
    s = summarize(rec, Path(path).resolve().relative_to(results.resolve()).as_posix(),
                  st.st_size, mtime_ns=st.st_mtime_ns, sha256=hashlib.sha256(raw).hexdigest())
    line = dumps_json_line(_to_json(s))
    try:
        fd = os.open(results / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
    except OSError:  # a cache: the next read_index reads the record itself
        pass
    return s


def _to_json(s: Summary) -> dict:
    d = dict(zip(_FIELDS, s))  # tuples (dirty_files) are written as JSON arrays
    d["v"] = INDEX_VERSION
    return d


def _from_json(d: Any) -> Optional[Summary]:
    if not isinstance(d, dict) or d.get("v") != INDEX_VERSION:
        return None
    if len(d) == _N_LINE and next(reversed(d)) == "v" and next(iter(d)) == "path":  # as `_to_json` wrote it
        return Summary._make(islice(d.values(), _N_LINE - 1))
    try:
        return Summary(**{k: d[k] for k in _FIELDS if k in d})
    except TypeError:
        return None


_N_LINE = len(_FIELDS) + 1


def _load_lines(index: Path) -> dict[str, Summary]:
    """The index's lines by path. Read as bytes, each line parsed as bytes (no decode and re-encode
    of 130 MB at 100,000 records), with the collector paused: 1.6-1.9 -> 1.1-1.5 s there. A line that
    does not parse (a torn last line, a byte that is not UTF-8) costs only its record, which is
    read again."""
    out: dict[str, Summary] = {}
    try:
        raw = index.read_bytes()
    except OSError:
        return out
    with paused_gc():  # some two million acyclic objects: a collection would walk them all, often
        for line in raw.splitlines():
            try:
                s = _from_json(loads_json(line))
            except ValueError:
                continue
            if s is not None:
                out[s.path] = s  # a later line for the same file wins
    return out


@dataclass(frozen=True)
class Index:
    summaries: tuple[Summary, ...]  # sorted by path
    reread: int  # records read from disk because the index lacked or mismatched them
    strays: tuple = ()  # (path, why) of what lies under records/ and is not a record (`scan_tree`)

    @property
    def good(self) -> list[Summary]:
        return [s for s in self.summaries if s.ok]

    @property
    def corrupt(self) -> list[Summary]:
        return [s for s in self.summaries if not s.ok]


def read_index(results: Path, *, repair: bool = True, workers: int = 2, use_index: bool = True) -> Index:
    """Summaries of every record on disk, from the index where it still matches the files.

    A line matches when the file's size and mtime are the ones it recorded; when only the mtime
    differs (a fresh clone, a copy) the file's sha256 decides, which is far cheaper than
    parsing it again. Anything else is read again from the record itself. ``use_index=False``
    reads every record (an index that git tracks came from elsewhere and vouches for nothing).
    """
    results = Path(results)
    known = _load_lines(results / INDEX_NAME) if use_index else {}
    keep: dict[str, Summary] = {}
    todo: list[str] = []
    moved: list[tuple[str, str, os.stat_result]] = []
    found, strays = scan_tree(results)
    for rel, full in found:
        s = known.get(rel)
        if s is not None:
            try:
                st = os.stat(full, follow_symlinks=False)
            except OSError:
                todo.append(rel)
                continue
            if st.st_size == s.size and st.st_mtime_ns == s.mtime_ns:
                keep[rel] = s
                continue
            if st.st_size == s.size:
                moved.append((rel, full, st))
                continue
        todo.append(rel)
    for (rel, _full, st), sha in zip(moved, _map(_sha_of, [m[1] for m in moved], workers)):
        if sha == known[rel].sha256:
            keep[rel] = known[rel]._replace(mtime_ns=st.st_mtime_ns)
        else:
            todo.append(rel)
    with paused_gc():  # 100,000 summaries arriving: collections would walk them again and again
        for s in _map(_summary_of, [(os.path.join(results, r), r) for r in todo], workers):
            keep[s.path] = s
    summaries = tuple(keep[k] for k in sorted(keep))
    if repair and (todo or moved or len(known) != len(keep)) and (results / "records").is_dir():
        try:
            write_index(results, summaries)
        except OSError:  # read-only or full: the index is a cache; the summaries are right anyway
            pass
    return Index(summaries, len(todo), tuple(strays))


def _sha_of(full: str) -> str:
    try:
        return hashlib.sha256(read_record_bytes(full)[0]).hexdigest()
    except RecordError:
        return ""


@contextmanager
def paused_gc():
    """No cyclic collection inside: for code that builds or parses a great many acyclic objects."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _map(fn, items: list, workers: int) -> Iterable:
    if workers > 1 and len(items) >= _PARALLEL_MIN:
        with ProcessPoolExecutor(workers, initializer=gc.disable) as pool:  # short-lived, acyclic work
            yield from pool.map(fn, items, chunksize=256)
    else:
        yield from map(fn, items)


def write_index(results: Path, summaries: Iterable[Summary]) -> None:
    """Rewrite the whole index atomically (temp file, then rename)."""
    results = Path(results)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-index-", suffix=".jsonl", dir=results)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(dumps_json_line(_to_json(s)) for s in summaries)
        os.chmod(tmp, 0o644)
        os.replace(tmp, results / INDEX_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
