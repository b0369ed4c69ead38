"""A sidecar summary of every record, so `publish` and `table` need not parse 100,000 JSON files.

`results/index.jsonl` holds one line per record: where it is, what it says (claim, hardware,
machine, time, verdict, value, CI, the hashes that decide whether it is current, a digest of what
it copied from its claim, the changed files it depends on) and the file's size, mtime and sha256. The runner appends a line after each `write_record`. The index is only a
cache: `read_index` checks every line against the record files on disk (size and mtime), reads
again any record that is new or changed, drops lines whose file is gone, and rewrites the index
when it had to repair it (a read-only results folder only skips that). `audit` never trusts it;
it reads every record itself, and `publish` re-reads every record it shows.

Which files are records is `store/scan.py`'s to say; what a line holds of one is `store/summary.py`'s.
"""

from __future__ import annotations

import gc
import hashlib
import os
import stat
import tempfile
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any, Iterable, Optional

from claimbench.spec.bounded import UnreadableFile, read_bytes
from claimbench.store.jsonio import dumps_json_line, loads_json
from claimbench.store.record import Record, RecordError, read_record_bytes
from claimbench.store.scan import scan_tree
from claimbench.store.summary import Summary, read_summary, summarize
from claimbench.versions import INDEX_VERSION  # its history is there

INDEX_NAME = "index.jsonl"
MAX_INDEX_BYTES = 4 << 30  # a cache: 130 MB at 100,000 records; past this it is read again from the records
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_PARALLEL_MIN = 2000  # below this, worker start-up costs more than it saves
_FIELDS = Summary._fields


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
    if not _ours(results / INDEX_NAME):  # someone else's file at that name: not ours to append to
        return s
    try:
        # never through a link: an index committed as a symlink to a shell's rc file got a line of
        # record text appended to it (an adversarial review); a link here is not ours to write, and
        # the next read_index rebuilds what this line would have said
        fd = os.open(results / INDEX_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o644)
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
    raw = _regular_bytes(index)
    if raw is None:
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


def read_index(results: Path, *, repair: bool = True, workers: int = 2, use_index: Optional[bool] = None) -> Index:
    """Summaries of every record on disk, from the index where it still matches the files.

    A line matches when the file's size and mtime are the ones it recorded; when only the mtime
    differs (a fresh clone, a copy) the file's sha256 decides, which is far cheaper than
    parsing it again. Anything else is read again from the record itself. ``use_index=False``
    reads every record; the default (None) does so, and never rewrites the index, when git tracks
    it: an index that came with a clone was written by whoever committed it and vouches for nothing
    (a committed line with a forged value showed 9.87x for a 1.62x record in `site`, `table` and
    `show`: an adversarial review; `publish` and `audit` already passed False).
    """
    results = Path(results)
    if use_index is None:
        from claimbench.store.provenance import carried_state

        use_index = INDEX_NAME not in carried_state(results)
        repair = repair and use_index
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


def _regular_bytes(path: Path) -> Optional[bytes]:
    """The bytes of ``path`` through the one bounded reader (a regular file, never through a link), or
    None: an index committed as a link to /dev/zero or a FIFO would be read for ever. The index of
    100,000 records is about 130 MB, so its bound is the largest a cache may reach, not a record's."""
    try:
        return read_bytes(path, limit=MAX_INDEX_BYTES, what="index")
    except UnreadableFile:
        return None


def _ours(path: Path) -> bool:
    """Whether ``path`` may be replaced by a new index: absent, or a regular file that is empty or
    opens with an index line. A link, or a file of someone else's that happens to bear the name
    (`table --results DIR` on a folder of theirs), is left as it is (an adversarial review)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if not stat.S_ISREG(st.st_mode):
        return False
    if st.st_size == 0:
        return True
    try:
        with open(path, "rb") as f:
            first = f.read(16)
    except OSError:
        return False
    # every index line opens with one of its keys (the writer's order puts "path" first); a line's
    # damage further on (a byte that is not UTF-8) leaves the file ours, to be repaired
    return first.replace(b" ", b"").startswith((b'{"path":', b'{"v":'))


def write_index(results: Path, summaries: Iterable[Summary]) -> None:
    """Rewrite the whole index atomically (temp file, then rename); a file at its name that is not
    an index (`_ours`) is left alone, and the index is not written (it is a cache)."""
    results = Path(results)
    if not _ours(results / INDEX_NAME):
        return
    fd, tmp = tempfile.mkstemp(prefix=".tmp-index-", suffix=".jsonl", dir=results)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(dumps_json_line(_to_json(s)) for s in summaries)
        os.chmod(tmp, 0o644)
        os.replace(tmp, results / INDEX_NAME)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
