"""A sidecar summary of every record, so `publish` and `table` need not parse 100,000 JSON files.

`results/index.jsonl` holds one line per record: where it is, what it says (claim, hardware,
time, verdict, value, CI, the hashes that decide whether it is current) and the file's size,
mtime and sha256. The runner appends a line after each `write_record`. The index is only a
cache: `read_index` checks every line against the record files on disk (size and mtime), reads
again any record that is new or changed, drops lines whose file is gone, and rewrites the index
when it had to repair it. `audit` never trusts it; it reads every record itself.
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
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Optional

from .jsonio import dumps_json_line, loads_json
from .record import Record, RecordError, parse_record

INDEX_NAME = "index.jsonl"
INDEX_VERSION = 1
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

    @property
    def ok(self) -> bool:
        return self.error is None


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
    return _short_name(str(name or hardware_slug(hw)))


@lru_cache(maxsize=256)
def _short_name(name: str) -> str:
    return re.sub(r"^(\d+× )?(NVIDIA|AMD|Intel\(R\)|Intel)\s+", r"\1", name).strip()


def summarize(rec: Record, rel: str, size: int, mtime_ns: int, sha256: str) -> Summary:
    return Summary(
        path=rel, size=size, mtime_ns=mtime_ns, sha256=sha256, claim_id=rec.claim_id,
        hardware=hardware_slug(rec.hardware), hardware_name=hardware_name(rec.hardware),
        created_utc=rec.created_utc, verdict=rec.verdict, reason=rec.reason, mode=rec.mode,
        value=rec.value, ci_low=rec.ci_low, ci_high=rec.ci_high, published_value=rec.published_value,
        metric=str(rec.claimed.get("metric", "")), dtype=str(rec.precision.get("dtype", "")),
        protocol_version=rec.protocol_version, floor_term=rec.floor_term, git_commit=rec.git_commit, git_dirty=rec.git_dirty,
        claim_path=rec.claim_path, claim_sha256=rec.claim_sha256, source_sha256=dict(rec.source_sha256))


def scan_records(results: Path) -> list[tuple[str, str]]:
    """(path relative to results, full path) of every record file, sorted; strings, not Paths,
    because this runs over 100,000 files on every publish."""
    base = os.path.join(results, "records")
    if not os.path.isdir(base):
        return []
    out = []
    for d in sorted((d for d in os.scandir(base) if d.is_dir() and not d.name.startswith(".")),
                    key=lambda e: e.name):
        names = sorted(f.name for f in os.scandir(d.path)
                       if f.name.endswith(".json") and not f.name.startswith(".") and f.is_file())
        out += [(f"records/{d.name}/{n}", os.path.join(d.path, n)) for n in names]
    return out


def record_files(results: Path) -> list[Path]:
    """Every record file: results/records/<claim-id>/*.json, temp files excluded, sorted."""
    return [Path(full) for _, full in scan_records(Path(results))]


def read_summary(full: str, rel: str, raw: Optional[bytes] = None, sha: Optional[str] = None,
                 st: Optional[os.stat_result] = None) -> tuple[Summary, Optional[Record]]:
    """Read one record file: its summary (with `error` set when unreadable) and the record."""
    st = st or os.stat(full)
    if raw is None:
        with open(full, "rb") as f:
            raw = f.read()
    sha = sha or hashlib.sha256(raw).hexdigest()
    claim_id = rel.split("/")[-2] if rel.count("/") >= 1 else ""
    try:
        try:
            data = loads_json(raw)
        except ValueError as e:  # UnicodeDecodeError and JSONDecodeError included
            raise RecordError(f"{rel}: corrupt or truncated JSON ({e})") from None
        rec = parse_record(data, rel)
    except RecordError as e:
        return Summary(rel, st.st_size, st.st_mtime_ns, sha, claim_id, error=str(e)), None
    return summarize(rec, rel, st.st_size, st.st_mtime_ns, sha), rec


def _summary_of(args: tuple[str, str]) -> Summary:
    raw, st = read_bytes_and_stat(args[0])
    return read_summary(args[0], args[1], raw, None, st)[0]


def read_bytes_and_stat(full: str) -> tuple[bytes, os.stat_result]:
    """A file's bytes and its stat through one descriptor: a third of the cost of open() and
    stat() apart, which counts over 100,000 records."""
    fd = os.open(full, os.O_RDONLY)
    try:
        st = os.fstat(fd)
        raw = os.read(fd, st.st_size + 1)  # one more byte than fstat says: a growing file reads on
        if len(raw) <= st.st_size:
            return raw, st
        chunks = [raw]
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks), st
    finally:
        os.close(fd)


def append_index(results: Path, path: Path, rec: Record) -> Summary:
    """Add one record to the index; the runner calls this right after `write_record`.

    One `write` of one line in append mode, so concurrent runners do not interleave lines; a
    line lost anyway (crash, race with a repair) is rebuilt by the next `read_index`.
    """
    results = Path(results)
    st = os.stat(path)
    raw = Path(path).read_bytes()
    s = summarize(rec, Path(path).resolve().relative_to(results.resolve()).as_posix(),
                  st.st_size, st.st_mtime_ns, hashlib.sha256(raw).hexdigest())
    line = dumps_json_line(_to_json(s))
    fd = os.open(results / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode("utf-8"))
    finally:
        os.close(fd)
    return s


def _to_json(s: Summary) -> dict:
    d = {name: getattr(s, name) for name in _FIELDS}
    d["source_sha256"] = dict(s.source_sha256)
    d["v"] = INDEX_VERSION
    return d


def _from_json(d: Any) -> Optional[Summary]:
    if not isinstance(d, dict) or d.get("v") != INDEX_VERSION:
        return None
    try:
        return Summary(**{k: d[k] for k in _FIELDS if k in d})
    except TypeError:
        return None


def _load_lines(index: Path) -> dict[str, Summary]:
    out: dict[str, Summary] = {}
    try:
        text = index.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return out
    for line in text.splitlines():
        try:
            s = _from_json(loads_json(line.encode("utf-8")))
        except ValueError:  # a torn last line: that record is simply read again
            continue
        if s is not None:
            out[s.path] = s  # a later line for the same file wins
    return out


@dataclass(frozen=True)
class Index:
    summaries: tuple[Summary, ...]  # sorted by path
    reread: int  # records read from disk because the index lacked or mismatched them

    @property
    def good(self) -> list[Summary]:
        return [s for s in self.summaries if s.ok]

    @property
    def corrupt(self) -> list[Summary]:
        return [s for s in self.summaries if not s.ok]


def read_index(results: Path, *, repair: bool = True, workers: int = 2) -> Index:
    """Summaries of every record on disk, from the index where it still matches the files.

    A line matches when the file's size and mtime are the ones it recorded; when only the mtime
    differs (a fresh clone, a copy) the file's sha256 decides, which is far cheaper than
    parsing it again. Anything else is read again from the record itself.
    """
    results = Path(results)
    known = _load_lines(results / INDEX_NAME)
    keep: dict[str, Summary] = {}
    todo: list[str] = []
    moved: list[tuple[str, str, os.stat_result]] = []
    for rel, full in scan_records(results):
        s = known.get(rel)
        if s is not None:
            st = os.stat(full)
            if st.st_size == s.size and st.st_mtime_ns == s.mtime_ns:
                keep[rel] = s
                continue
            if st.st_size == s.size:
                moved.append((rel, full, st))
                continue
        todo.append(rel)
    for (rel, full, st), sha in zip(moved, _map(_sha_of, [m[1] for m in moved], workers)):
        if sha == known[rel].sha256:
            keep[rel] = known[rel]._replace(mtime_ns=st.st_mtime_ns)
        else:
            todo.append(rel)
    with paused_gc():  # 100,000 summaries arriving: collections would walk them again and again
        for s in _map(_summary_of, [(os.path.join(results, r), r) for r in todo], workers):
            keep[s.path] = s
    summaries = tuple(keep[k] for k in sorted(keep))
    if repair and (todo or moved or len(known) != len(keep)) and (results / "records").is_dir():
        write_index(results, summaries)
    return Index(summaries, len(todo))


def _sha_of(full: str) -> str:
    with open(full, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


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
        with ProcessPoolExecutor(workers) as pool:
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
