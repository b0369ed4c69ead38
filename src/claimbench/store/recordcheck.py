"""Check one record against itself: recompute its verdict, value and CI from its own samples.

What is checked here depends only on the record's bytes, so the answer is cached by sha256 (with
a fingerprint of the checking code). `audit` checks every record this way; `publish` checks each
record it is about to let decide a number, so neither ever shows a number the other rejects.
Records are checked in chunks, their bootstraps batched (about 0.15 ms a record in all).
"""

from __future__ import annotations

import hashlib
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from claimbench.spec.modelglob import glob_any
from claimbench.stats.precision import evidence_device
from claimbench.stats.samples import median
from claimbench.stats.status import Status
from claimbench.store import auditcache
from claimbench.store.cachefile import load_json_cache, save_cache
from claimbench.store.codeprint import code_fingerprint
from claimbench.store.index import paused_gc
from claimbench.store.jsonio import canonical_json
from claimbench.store.record import MIN_PROTOCOL_VERSION, Record, RecordError, read_record_bytes, same_value
from claimbench.store.summary import Summary, read_summary

REL_TOL = 1e-9
_KNOWN: frozenset = frozenset()


def _close(a: Optional[float], b: Optional[float]) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if not (math.isfinite(a) and math.isfinite(b)):
        return a == b
    return abs(a - b) <= REL_TOL * max(abs(a), abs(b)) + 1e-12


def check_record(rec: Record) -> list[tuple[str, str]]:
    """(key, message) for each invariant the record breaks, and each field decide() disagrees with."""
    return check_records([rec])[0]


def check_records(recs: list[Record]) -> list[list[tuple[str, str]]]:
    """``check_record`` for each record, with their verdicts recomputed together (one batched bootstrap)."""
    from claimbench.stats.verdict import Evidence, decide, decide_many

    evidence: list[Evidence | Exception] = []
    verdicts = []
    for rec in recs:
        try:
            evidence.append(rec.evidence())
        except Exception as e:  # a record decide() cannot read is itself a failure
            evidence.append(e)
    readable = [ev for ev in evidence if not isinstance(ev, Exception)]
    said = [(rec.ci_low, rec.ci_high) for rec, ev in zip(recs, evidence) if not isinstance(ev, Exception)]
    try:
        batch = iter(decide_many(readable, hints=said))  # each record's own interval: where to look first
        verdicts = [ev if isinstance(ev, Exception) else next(batch) for ev in evidence]
    except Exception:  # one unreadable record must not hide the others: decide them one by one
        verdicts = [ev if isinstance(ev, Exception) else _decide_or_error(decide, ev) for ev in evidence]
    return [_compare(rec, v) for rec, v in zip(recs, verdicts)]


def _decide_or_error(decide, ev):
    try:
        return decide(ev)
    except Exception as e:
        return e


def _intrinsic(rec: Record) -> list[tuple[str, str]]:
    """What the record's own bytes contradict, whatever its verdict says (issue 25): hardware its
    claim would not accept, medians that are not its samples' medians. Nothing here depends on the
    clock, since the answer is cached by the record's sha256: a date in the future is judged at each
    check, against the clock of that moment (`standing.future_problem`)."""
    out = []
    if rec.protocol_version >= MIN_PROTOCOL_VERSION:
        # a runner of a protocol that may still stand always copies both blocks: only a record
        # migrated from schema 2 (protocol 4 or older) lacks them. Set to null by hand, they turned
        # off the hardware check below and the claim-copy check's half that reads them (a CPU
        # claim's number published as an H100's, audit clean: an adversarial review).
        for name in ("hardware_spec", "workload"):
            if getattr(rec, name) is None:
                out.append((name, f"is missing, but every runner of protocol {MIN_PROTOCOL_VERSION} or later "
                                  "copies the claim's block into its record: removed by hand?"))
    if rec.verdict == Status.VERIFIED.value and rec.protocol_version >= 8 and isinstance(rec.protocol, dict) \
            and rec.protocol.get("device") == "cpu":
        # a CPU run of protocol 8 or later counts the interrupts and times the refresh null calls of both
        # sides, and cannot verify without them; a record without them was written under an older
        # protocol and relabelled (a one-character edit published a protocol-5 number: an adversarial review)
        bracket = rec.protocol.get("bracket")
        held = bracket if isinstance(bracket, dict) else {}
        missing = [k for k in ("irq", "irq_wall_us", "refresh") if not held.get(k)]
        if missing:
            out.append(("protocol.bracket", f"has no {', '.join(missing)}, which every CPU run of protocol 8 or "
                                            f"later measures before it can verify; the record says protocol "
                                            f"{rec.protocol_version}: relabelled from an older one?"))
    spec, hw = rec.hardware_spec or {}, rec.hardware or {}
    if rec.hardware_match and spec:
        # the device the verdict's rules read: a CPU claim's record saying "cuda" skipped the
        # three-process and busy-machine rules
        used = evidence_device(rec.protocol if isinstance(rec.protocol, dict) else {}, hw)
        if not hw:
            out.append(("hardware", "says it matched its claim's hardware, but names no hardware: a measured record "
                                    "carries the machine it ran on"))
        elif used != spec.get("device"):
            out.append(("protocol.device", f"says it matched its claim's hardware, but ran its sides on "
                                           f"{used or 'no device'!r}, not the claim's {spec.get('device')!r}"))
    if rec.hardware_match and spec and hw:
        raw = spec.get("model", ["*"])
        if not isinstance(raw, list) or not all(isinstance(m, str) for m in raw):
            return [("hardware_spec", f"model must be a list of names, not {raw!r}")]
        models = raw or ["*"]
        cpu = hw.get("cpu")
        if spec.get("device") == "cpu":
            found = str(cpu.get("model") or "") if isinstance(cpu, dict) else ""
            ok = _matches(tuple(models), found)
        else:
            names = [str(g.get("name") or "") for g in hw.get("gpus") or () if isinstance(g, dict)]
            found = ", ".join(names) or "no GPU"
            ok = hw.get("device") == "cuda" and any(_matches(tuple(models), n) for n in names)
        if not ok:
            out.append(("hardware", f"says it matched its claim's hardware ({spec.get('device')} "
                                    f"{' or '.join(models)}), but it ran on {found}"))
    if rec.sweep_point is not None and (bad := _off_sweep(rec)) is not None:
        out.append(("sweep_point", bad))
    for name, t in (("kernel", rec.kernel), ("baseline", rec.baseline)):
        if t.samples_us and t.median_us is not None and not _close(t.median_us, mid := median(t.samples_us)):
            out.append((f"{name}.median_us", f"says {t.median_us!r}, but its {len(t.samples_us)} samples' median is "
                                             f"{mid!r}: edited by hand?"))
    return out


@lru_cache(maxsize=4096)
def _matches(models: tuple[str, ...], name: str) -> bool:
    """`glob_any`, remembered: 100,000 records name a few dozen machines."""
    return glob_any(models, name)


def _off_sweep(rec: Record) -> Optional[str]:
    """Why a record's sweep point is not one of the off points its own copy of the claim sweeps
    (the copy is held to the claim file separately); None when it is."""
    point = rec.sweep_point
    assert point is not None
    work = rec.workload if isinstance(rec.workload, dict) else {}
    sweep, params = work.get("sweep"), work.get("params")
    values = sweep.get(point.axis) if isinstance(sweep, dict) else None
    if not isinstance(values, list) or not isinstance(params, dict):
        return f"{point.label}: its claim's workload sweeps no `{point.axis}`"
    if not any(same_value(v, point.value) for v in values):
        return f"{point.label}: not one of its claim's sweep values {values}"
    if same_value(params.get(point.axis), point.value):
        return f"{point.label} is the claim's own params: that record is the claim's, with no sweep_point"
    return None


def _compare(rec: Record, v) -> list[tuple[str, str]]:
    out = _intrinsic(rec)
    verified = rec.verdict == Status.VERIFIED.value
    if rec.published_value is not None and not verified:
        out.append(("published_value", f"set on a {rec.verdict} record; only verified records carry one"))
    if verified and rec.correctness.get("passed") is not True:
        out.append(("correctness", f"the record says verified, but correctness.passed is "
                                   f"{rec.correctness.get('passed')!r}"))
    if verified and rec.mode not in ("measured", "measured-hot"):
        out.append(("mode", f"the record says verified, but its mode is {rec.mode!r}, not measured"))
    if isinstance(v, Exception):
        return out + [("verdict", f"cannot recompute the verdict: {type(v).__name__}: {v}")]
    if v.status.value != rec.verdict:
        out.append(("verdict", f"says {rec.verdict}, but recomputing from its own samples, correctness "
                               f"data and claim gives {v.status.value} ({v.reason}): edited by hand?"))
    for name in ("value", "ci_low", "ci_high", "published_value"):
        have, want = getattr(rec, name), getattr(v, name)
        if not _close(have, want):
            out.append((name, f"says {have!r}, but recomputing gives {want!r}: edited by hand?"))
    return out


# Every module whose code can change a record's problems: the audit and verified-record caches are
# keyed by their source. tests/store/test_codeprint.py holds it to what these modules import.
_CODE = (
    "claimbench.store.recordcheck", "claimbench.stats.verdict", "claimbench.stats.resample", "claimbench.stats.percentile",
    "claimbench.stats.rounds", "claimbench.stats.samples", "claimbench.options",
    "claimbench.stats.settle", "claimbench.stats.precision", "claimbench.stats.status", "claimbench.store.record",
    "claimbench.store.recordwrite", "claimbench.store.index", "claimbench.store.summary", "claimbench.store.scan",
    "claimbench.store.provenance", "claimbench.store.claimcopy", "claimbench.store.jsonio", "claimbench.store.codeprint",
    "claimbench.store.auditcache", "claimbench.store.cachefile", "claimbench.store.migrate", "claimbench.spec.display",
    "claimbench.spec.modelglob", "claimbench.spec.expr", "claimbench.spec.bounded", "claimbench.errors",
    "claimbench.versions")


def fingerprint() -> str:
    """Changes whenever the code that decides a record's problems changes."""
    return code_fingerprint(_CODE)


def _init(known: frozenset) -> None:
    global _KNOWN
    _KNOWN = known


def _init_worker(known: frozenset) -> None:
    _init(known)
    _keep_freed_memory()


def _keep_freed_memory() -> None:
    """Ask glibc to keep freed memory instead of returning it after every batch: the batched
    bootstrap frees megabytes per batch, and faulting them back in cost a tenth of the worker's time."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD
        libc.mallopt(-3, 64 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):  # not glibc: only slower
        pass


def _verify_chunk(items: list[tuple[str, str]]) -> list[tuple]:
    """(rel, size, mtime, sha256, summary, problems, cache line, stat key) for each record file;
    summary, problems and line are None for a record the cache already knows by its sha256, and
    the stat key is None for a file changed too recently to be found by its stat (`auditcache`)."""
    with paused_gc():  # parsing allocates millions of acyclic objects; collecting them finds nothing
        return _verify_chunk_now(items)


def _verify_chunk_now(items: list[tuple[str, str]]) -> list[tuple]:
    rows: list[list[Any]] = []  # lists while the problems and cache line are filled in
    fresh = []
    read_ns = time.time_ns()  # before any read: a file must have been still since well before it
    for rel, full in items:
        try:
            raw, st = read_record_bytes(full, rel)
        except RecordError as e:  # too big, not a regular file, gone: unreadable, and named
            s = Summary(rel, 0, 0, "", rel.split("/")[-2], error=str(e))
            rows.append([rel, 0, 0, "", s, [("record", s.error)], None, None])
            continue
        sha = hashlib.sha256(raw).hexdigest()
        key = auditcache.still_key(st, read_ns)
        if sha in _KNOWN:
            rows.append([rel, st.st_size, st.st_mtime_ns, sha, None, None, None, key])
            continue
        s, rec = read_summary(full, rel, raw, sha=sha, st=st)
        rows.append([s.path, s.size, s.mtime_ns, s.sha256, s, [("record", s.error)] if rec is None else None, None, key])
        if rec is not None:
            fresh.append((rows[-1], rec))
    for (row, _), probs in zip(fresh, check_records([rec for _, rec in fresh])):
        row[5] = probs
    for row in rows:  # the cache line is written here, in parallel, not by the parent
        if row[4] is not None and row[3]:
            row[6] = auditcache.line_for(row[3], row[0], row[7], s=row[4], problems=row[5] or [])
    return [tuple(r) for r in rows]


_CHUNK = 256  # records per task: enough to batch their bootstraps, few enough to balance two workers
_PARALLEL_MIN = 500


def check_record_files(items: list[tuple[str, str]], workers: int = 2, known: frozenset = frozenset(), *,
                       side: Optional[Callable[[], Any]] = None, side_out: Optional[list] = None) -> Iterable[list[tuple]]:
    """`_verify_chunk` over (rel, full) items in chunks, on `workers` processes when there are
    many; yields each chunk's rows in order. ``side``, a picklable callable, runs on one of the
    workers meanwhile and its result is appended to ``side_out``; it runs only when workers start."""
    chunks = [items[i:i + _CHUNK] for i in range(0, len(items), _CHUNK)]
    if workers > 1 and len(items) >= _PARALLEL_MIN:
        with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(known,)) as pool:
            pending = pool.submit(side) if side is not None else None
            yield from pool.map(_verify_chunk, chunks)  # collected by the caller while the workers go on
            if pending is not None and side_out is not None:
                side_out.append(pending.result())
        return
    _init(known)
    try:
        for chunk in chunks:
            yield _verify_chunk(chunk)
    finally:
        _init(frozenset())


class Verifier:
    """Publish's side of the check: each record about to decide a number is read again and
    hashed (an index line can be stale in ways its size and mtime do not show), answered from a
    small cache by sha256 (problems, and a digest of the summary the file gives, so an index line
    that says something else is read again), else checked like audit checks it (in parallel when
    there are many). Called as `verify` by `standing.judge`."""

    def __init__(self, results_dir: Path, *, cache: bool = True, workers: int = 2):
        self.results = Path(results_dir)
        self.workers = workers
        self.cfile = self.results / ".cache" / f"verified-{fingerprint()}.json" if cache else None
        self.known = load_json_cache(self.cfile)

    def __call__(self, summaries: list[Summary]) -> dict:
        out, todo, by_path = {}, [], {s.path: s for s in summaries}
        for s in summaries:
            full = os.path.join(self.results, s.path)
            try:
                raw, _ = read_record_bytes(full, s.path)
            except RecordError as e:
                out[s.path] = (s, [("record", str(e))])
                continue
            sha = hashlib.sha256(raw).hexdigest()
            hit = self.known.get(sha)
            if sha == s.sha256 and isinstance(hit, list) and len(hit) == 2 and hit[1] == summary_digest(s):
                out[s.path] = (s, [tuple(p) for p in hit[0]])
            else:
                todo.append((s.path, full))
        fresh = 0
        with paused_gc():  # the workers' rows are unpickled here; they hold no cycles
            for rows in check_record_files(todo, self.workers):
                for rel, _size, _mtime, sha, summary, probs, _line, _key in rows:
                    s = by_path[rel]
                    said = summary_digest(summary)
                    out[rel] = (s if sha == s.sha256 and said == summary_digest(s) else summary,
                                [tuple(p) for p in probs or ()])
                    if sha:
                        self.known[sha] = [[list(p) for p in probs or ()], said]
                        fresh += 1
        if fresh and self.cfile is not None:
            save_cache(self.cfile, self.known, "verified-*.json")
        return out


def summary_digest(s: Summary) -> str:
    """What a record file says, as its summary holds it (not where it is or when it was touched)."""
    raw = canonical_json(list(s[auditcache.FROM_FILE:]))  # a tuple when summarized and a list when read back: one JSON array
    if raw is None:
        raw = canonical_json(list(s[auditcache.FROM_FILE:]), "j")
        assert raw is not None  # the standard library's method is always there
    return hashlib.sha256(raw).hexdigest()[:16]
