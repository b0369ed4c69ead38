"""The audit's cache: what checking each record file found, so that a warm audit reads no record
whose file has not changed.

One JSON array per line: ``[sha256, path, stat, summary fields, problems]``. A line is found by
the record's sha256 (a copied or moved record is not checked again) or, without reading the file
at all, by its path and ``stat``: the (size, mtime_ns, ctime_ns, inode) of the very descriptor
that was read and hashed. That stat is kept only when the file had been still for ``STILL_NS``
before it was read, git's rule for its own index: any later write to the file moves its ctime,
which no user can set back (only the system clock can), and a write in the same clock tick as the
read cannot go unseen because no write came within two seconds of it. So a file whose stat still
matches holds the bytes that were checked; anything else is read and hashed again. A line's
summary fields are stored by position: the fingerprint in the file's name covers this module, so
a change of order names another file.

The cache is local state, trusted as this user's own files are; one that git tracks is never
read (`provenance.carried_state`), and ``audit --no-cache`` reads and hashes every record.
"""

from __future__ import annotations

import os
import stat as _stat
from pathlib import Path
from typing import Iterable, NamedTuple, Optional

from claimbench.store.cachefile import save_cache
from claimbench.store.index import paused_gc
from claimbench.store.jsonio import dumps_json_line, loads_json
from claimbench.store.summary import Summary

STILL_NS = 2_000_000_000  # a file must have been still this long when read for its stat to name its bytes
FROM_FILE = 4  # path, size, mtime_ns, sha256: known from the file itself, so not what a record says
assert Summary._fields[:FROM_FILE] == ("path", "size", "mtime_ns", "sha256")
_KEEP = len(Summary._fields) - FROM_FILE


class Entry(NamedTuple):
    """One cached record check."""

    sha256: str
    path: str
    stat: Optional[tuple[int, int, int, int]]  # None: the file was fresh when read; find it by sha256 only
    fields: list  # Summary fields after the first four, by position
    problems: list  # [(key, message)]
    line: bytes  # the line itself, newline included, written back unchanged


def stat_key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)


def still_key(st: os.stat_result, read_ns: int) -> Optional[tuple[int, int, int, int]]:
    """The stat to find this file by next time, or None when it changed too recently to be sure."""
    return stat_key(st) if st.st_ctime_ns < read_ns - STILL_NS else None


def line_for(sha: str, rel: str, key: Optional[tuple], *, s: Summary, problems: list) -> bytes:
    return _line([sha, rel, list(key) if key else None, list(s[FROM_FILE:]), [list(p) for p in problems]])


def relined(e: Entry, rel: str, key: Optional[tuple]) -> bytes:
    """The entry's line for the file where it was found now, under the stat it has now."""
    if rel == e.path and key == e.stat:
        return e.line
    return _line([e.sha256, rel, list(key) if key else None, e.fields, [list(p) for p in e.problems]])


def _line(row: list) -> bytes:
    return dumps_json_line(row).encode("utf-8")


def summary_of(e: Entry, rel: str, size: int, *, mtime_ns: int) -> Summary:
    s = Summary._make((rel, size, mtime_ns, e.sha256, *e.fields))
    return s._replace(dirty_files=tuple(s.dirty_files)) if s.dirty_files else s


class Cache(NamedTuple):
    by_sha: dict[str, Entry]
    by_path: dict[str, Entry]  # only entries with a stat

    def unchanged(self, rel: str, full: str) -> Optional[tuple[Entry, os.stat_result]]:
        """The entry for the file at ``rel`` when its stat still names the bytes that were checked."""
        e = self.by_path.get(rel)
        if e is None:
            return None
        try:
            st = os.lstat(full)
        except OSError:
            return None
        return (e, st) if _stat.S_ISREG(st.st_mode) and stat_key(st) == e.stat else None


def load(path: Optional[Path]) -> Cache:
    """The cache file's entries; a damaged line (a killed write) costs only its record. Parsed a
    line at a time: at 100,000 records that is 0.37 s against 0.72 s for one parse of the lines
    joined into an array (orjson 3.13, the collector paused in both)."""
    cache = Cache({}, {})
    if path is None:
        return cache
    try:
        raw = path.read_bytes()
    except OSError:
        return cache
    with paused_gc():  # some three million acyclic objects: a collection would walk them all, often
        for line in raw.splitlines(keepends=True):
            try:
                e = _entry(loads_json(line), line)
            except (ValueError, TypeError):
                continue
            cache.by_sha[e.sha256] = e
            if e.stat is not None:
                cache.by_path[e.path] = e
    return cache


def _entry(row, raw: bytes) -> Entry:
    sha, rel, key, fields, problems = row
    if not (isinstance(sha, str) and isinstance(rel, str) and isinstance(fields, list) and len(fields) == _KEEP
            and isinstance(problems, list)):
        raise ValueError("not a cache line")
    stat = tuple(key) if isinstance(key, list) and len(key) == 4 and all(type(v) is int for v in key) else None
    return Entry(sha, rel, stat, fields, [tuple(p) for p in problems], raw if raw.endswith(b"\n") else raw + b"\n")


def save(path: Path, lines: Iterable[bytes]) -> None:
    """Caches of older code (another fingerprint) are dead weight: removed once this one is written."""
    save_cache(path, lines, "audit-*.jsonl")
