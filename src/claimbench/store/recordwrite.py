"""Writing records: the runner's file names, atomic no-clobber writes, and what to do when the
disk says no.

A record is evidence: it must be whole or absent, never half-written, and a run must never
replace another run's record. So a record goes to a temp file in its own folder, is flushed,
and is then hard-linked to its name (a link fails instead of replacing). Disk full, a read-only
folder or missing permissions give one line naming the path (`RecordWriteError`), and the
measurement is kept elsewhere by `keep_unwritable`. Nothing here imports the record model: the
runner, ingest and tests reach these through `claimbench.store.record`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from claimbench.errors import UserError

# The runner's file names: <UTC second>-<hardware slug>-<10 hex of the content>[-<n>].json. The
# content holds this run's random seeds and its microsecond, so concurrent runs never share one;
# the -<n> suffix is the no-clobber fallback of `write_record`.
RECORD_NAME = re.compile(r"^([0-9]{8}T[0-9]{6})Z-[a-z0-9]+(?:-[a-z0-9]+)*-[0-9a-f]{10}(?:-[0-9]{1,6})?\.json$")  # [0-9]: ASCII only
TEMP_NAME = re.compile(r"^\.tmp-[A-Za-z0-9_]+\.json$")
NOT_A_RECORD_NAME = ("not a record the runner wrote (its names read <UTC time>Z-<hardware>-<10 hex>.json); "
                     "move it out of results/records/")


def name_problem(name: str, when: str) -> Optional[tuple[str, str]]:
    """(key, why) when ``name`` cannot be the file name of a record created at ``when`` (its
    created_utc, normalized), else None. One rule for ingest, audit and publish: the runner's
    pattern, and the UTC second the name starts with is the record's own, so a record renamed
    (or with its time edited) to sort as the latest is refused wherever it is read."""
    if not RECORD_NAME.match(name):
        return "file", NOT_A_RECORD_NAME
    if name[:16] != when[:19].replace("-", "").replace(":", "") + "Z":
        return "created_utc", (f"{when or 'no valid created_utc'} does not match the time in the file name {name!r}; "
                               "record names are written by the runner")
    return None


def _slug(text: str) -> str:
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9]+", "-", text.lower())).strip("-")[:60].strip("-") or "unknown"


def record_path(results: Path, rec) -> Path:
    """results/records/<claim-id>/<UTC time>-<hardware slug>-<short hash>.json"""
    stamp = re.sub(r"[^0-9T]", "", rec.created_utc.split(".")[0].removesuffix("Z").removesuffix("+00:00")) + "Z"
    digest = hashlib.sha256(rec.model_dump_json().encode()).hexdigest()[:10]
    return results / "records" / rec.claim_id / f"{stamp}-{_slug(rec.hardware_slug)}-{digest}.json"


def record_json(rec) -> str:
    """The record as written: top-down field order, indented, each list of numbers on one line."""
    return _dump(rec.model_dump(mode="json"), "") + "\n"


def _dump(obj: Any, pad: str) -> str:
    if isinstance(obj, dict):
        if not obj:
            return "{}"
        inner = pad + " "
        return "{\n" + ",\n".join(f"{inner}{json.dumps(str(k))}: {_dump(v, inner)}" for k, v in obj.items()) + "\n" + pad + "}"
    if isinstance(obj, list) and obj and not all(_scalar(x) for x in obj):
        inner = pad + " "
        return "[\n" + ",\n".join(inner + _dump(v, inner) for v in obj) + "\n" + pad + "]"
    return json.dumps(obj, allow_nan=False, separators=(", ", ": "))


def _scalar(x: Any) -> bool:
    return x is None or isinstance(x, (bool, int, float, str))


class RecordWriteError(UserError):
    """A record could not be written (disk full, read-only, permissions); nothing half-written is left."""


def write_record(results: Path, rec) -> Path:
    """Atomic and no-clobber: a temp file in the same folder, flushed, then linked to its name
    (a hard link fails rather than replace a file another run wrote). Raises RecordWriteError,
    one line naming the path, when the disk is full or the folder cannot be written; the caller
    keeps the measurement with `keep_unwritable`."""
    path = record_path(results, rec)
    data = record_json(rec).encode("utf-8")
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        _clean_stale_temps(path.parent)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        path = _link_no_clobber(tmp, path)
    except OSError as e:
        raise RecordWriteError(f"{path}: cannot write the record: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
    return path


def _link_no_clobber(tmp: str, path: Path) -> Path:
    for n in range(1, 1000):
        target = path if n == 1 else path.with_name(f"{path.stem}-{n}.json")
        try:
            os.link(tmp, target)
            return target
        except FileExistsError:
            continue
        except OSError:  # no hard links here: exclusive create, then replace the empty file
            try:
                os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
            except FileExistsError:
                continue
            os.replace(tmp, target)
            return target
    raise FileExistsError(f"{path}: 999 records of this name already exist")


def _clean_stale_temps(folder: Path, age_s: float = 3600.0) -> None:
    """Temp files of a run killed while writing: an hour old is long dead (a write takes ms)."""
    try:
        for e in os.scandir(folder):
            if TEMP_NAME.match(e.name) and e.is_file(follow_symlinks=False) \
                    and time.time() - e.stat(follow_symlinks=False).st_mtime > age_s:
                os.unlink(e.path)
    except OSError:
        pass


def keep_unwritable(rec, near: Optional[Path] = None) -> str:
    """Keep a finished measurement that `write_record` could not write: as a file next to `near`
    (the claim's log, say) when that folder can be written, else as JSON on stderr. Returns where
    it went, for the one-line error ("... kept at PATH" / "... printed to stderr")."""
    data = record_json(rec)
    if near is not None:
        target = Path(near).with_name(f"{Path(near).stem}.unwritten-record.{os.getpid()}.json")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(data, encoding="utf-8")
            return f"kept at {target}"
        except OSError:  # a full disk: never leave a 0-byte or cut copy that looks like the measurement
            try:
                target.unlink(missing_ok=True)
            except OSError:
                pass
    sys.stderr.write(data)
    sys.stderr.flush()
    return "printed to stderr as JSON"


def check_writable(results: Path) -> None:
    """Raise a one-line UserError when records cannot be written under `results` (run checks
    this before measuring anything)."""
    folder = Path(results) / "records"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
        os.close(fd)
        os.unlink(tmp)
    except OSError as e:
        raise RecordWriteError(f"{folder}: records cannot be written here ({e.strerror or e}); "
                               "pass --results DIR for a writable folder") from None
