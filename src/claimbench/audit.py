"""Audit: prove that every number in the list is backed, and that every record says what it holds.

CI runs this on every pull request, on CPU. It reads every record file itself (never the index),
recomputes each verdict, value and CI from the record's own samples with `decide`, recomputes
what `publish` would write, and compares that with the list. Every failure is a located
`Problem`. Records are checked in chunks on two worker processes, their bootstraps batched
(about 0.15 ms a record in all); results are cached under `results/.cache/` keyed by the
record's sha256 and a fingerprint of the checking code: an edited record has a new sha256 and is
checked again; an unchanged one is still read and hashed. CI starts without the cache.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import tempfile
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path
from typing import Callable, Optional

from .index import Summary, paused_gc, read_bytes_and_stat, read_summary, scan_records
from .listing import Entry, ListError, parse_list, read_region
from .problem import Problem
from .jsonio import dumps_json_line, loads_json
from .record import Record
from .status import Status

CACHE_DIR = ".cache"
REL_TOL = 1e-9
_PARALLEL_MIN = 500
_CHUNK = 256  # records per task: enough to batch their bootstraps, few enough to balance two workers
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_KNOWN: frozenset = frozenset()
_KEEP = tuple(f for f in Summary._fields if f not in ("path", "size", "mtime_ns", "sha256"))


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
    from .verdict import decide, decide_many

    evidence, verdicts = [], []
    for rec in recs:
        try:
            evidence.append(rec.evidence())
        except Exception as e:  # a record decide() cannot read is itself a failure
            evidence.append(e)
    readable = [ev for ev in evidence if not isinstance(ev, Exception)]
    try:
        batch = iter(decide_many(readable))
        verdicts = [ev if isinstance(ev, Exception) else next(batch) for ev in evidence]
    except Exception:  # one unreadable record must not hide the others: decide them one by one
        verdicts = [ev if isinstance(ev, Exception) else _decide_or_error(decide, ev) for ev in evidence]
    return [_compare(rec, v) for rec, v in zip(recs, verdicts)]


def _decide_or_error(decide, ev):
    try:
        return decide(ev)
    except Exception as e:
        return e


def _compare(rec: Record, v) -> list[tuple[str, str]]:
    out = []
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


def fingerprint() -> str:
    """Changes whenever the code that decides a record's problems changes."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in ("audit.py", "verdict.py", "precision.py", "bootstrap.py", "record.py", "index.py", "status.py"):
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


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
    """(rel, size, mtime, sha256, summary, problems, cache line) for each record file; the last
    three are None for a record the cache already knows."""
    with paused_gc():  # parsing allocates millions of acyclic objects; collecting them finds nothing
        return _verify_chunk_now(items)


def _verify_chunk_now(items: list[tuple[str, str]]) -> list[tuple]:
    rows, fresh = [], []
    for rel, full in items:
        raw, st = read_bytes_and_stat(full)
        sha = hashlib.sha256(raw).hexdigest()
        if sha in _KNOWN:
            rows.append((rel, st.st_size, st.st_mtime_ns, sha, None, None, None))
            continue
        s, rec = read_summary(full, rel, raw, sha, st)
        rows.append([s.path, s.size, s.mtime_ns, s.sha256, s, [("record", s.error)] if rec is None else None, None])
        if rec is not None:
            fresh.append((rows[-1], rec))
    for (row, _), probs in zip(fresh, check_records([rec for _, rec in fresh])):
        row[5] = probs
    for row in rows:  # the cache line is written here, in parallel, not by the parent
        if row[4] is not None:
            row[6] = _cache_line(row[3], row[4], row[5])
    return [tuple(r) for r in rows]


def verify_records(results: Path, *, workers: int = 2, cache: bool = True,
                   side: Optional[Callable] = None) -> tuple[list[tuple[Summary, list]], object]:
    """Read, hash and check every record file; (summary, [(key, message)]) for each, by path.

    ``side``, a picklable callable, runs on one of the workers while the others read records, so
    the serial work after this (checking the claims) is already done; its result comes second
    (None when there were too few records to start workers)."""
    results = Path(results)
    cfile = results / CACHE_DIR / f"audit-{fingerprint()}.jsonl"
    cached = _load_cache(cfile) if cache else {}
    paths = scan_records(results)
    chunks = [paths[i:i + _CHUNK] for i in range(0, len(paths), _CHUNK)]
    side_result = None
    out, lines = [], {}
    if workers > 1 and len(paths) >= _PARALLEL_MIN:
        with ProcessPoolExecutor(workers, initializer=_init_worker, initargs=(frozenset(cached),)) as pool, paused_gc():
            pending = pool.submit(side) if side is not None else None
            for chunk in pool.map(_verify_chunk, chunks):  # collected while the workers go on
                _collect(chunk, cached, out, lines)
            side_result = pending.result() if pending is not None else None
    else:
        _init(frozenset(cached))
        try:
            for chunk in chunks:
                _collect(_verify_chunk(chunk), cached, out, lines)
        finally:
            _init(frozenset())
    if cache and lines.keys() != cached.keys():
        _save_cache(cfile, lines.values())
    return out, side_result


def _collect(rows, cached, out: list, lines: dict) -> None:
    """Summaries and problems into ``out``; every record's cache line into ``lines``."""
    with paused_gc():
        for rel, size, mtime, sha, s, probs, line in rows:
            if s is None:
                summ, probs, lines[sha] = cached[sha]
                s = Summary(path=rel, size=size, mtime_ns=mtime, sha256=sha, **summ)
            else:
                lines[sha] = line
            folder = rel.split("/")[-2]
            if s.ok and s.claim_id != folder:
                probs = probs + [("claim_id", f"{s.claim_id!r} does not match its folder {folder!r}")]
            out.append((s, probs))


def _cache_line(sha: str, s: Summary, probs: list) -> str:
    return dumps_json_line({"sha256": sha, "summary": {k: getattr(s, k) for k in _KEEP}, "problems": probs})


def _load_cache(path: Path) -> dict:
    """sha256 -> (summary fields, problems, the line itself)."""
    out = {}
    try:
        lines = path.read_bytes().splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            d = loads_json(line)
            out[d["sha256"]] = (d["summary"], [tuple(p) for p in d["problems"]], line.decode("utf-8") + "\n")
        except (ValueError, KeyError, TypeError):
            continue
    return out


def _save_cache(path: Path, lines) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(lines)
    os.replace(tmp, path)
    for old in path.parent.glob("audit-*.jsonl"):  # caches of older code are dead weight
        if old != path:
            old.unlink(missing_ok=True)


def audit(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
          max_per_entry: int = 3, workers: int = 2, cache: bool = True) -> list[Problem]:
    """Every reason the list or the records cannot be trusted; empty when all is well."""
    return audit_report(root, list_path, results_dir, allow_dirty=allow_dirty, max_per_entry=max_per_entry,
                        workers=workers, cache=cache)[0]


def audit_report(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
                 max_per_entry: int = 3, workers: int = 2, cache: bool = True) -> tuple[list[Problem], list]:
    """(problems, [(summary, record problems)] for every record file checked)."""
    root, list_path, results_dir = Path(root), Path(list_path), Path(results_dir)
    checked, known = verify_records(results_dir, workers=workers, cache=cache,
                                    side=partial(_check_claim_files, root, list_path))
    with paused_gc():  # a million live objects from the records: every collection would walk them all
        return _audit_list(root, list_path, results_dir, checked, allow_dirty, max_per_entry, cache, known), checked


def _check_claim_files(root: Path, list_path: Path) -> Optional[dict]:
    """`check_file` of every claim file under claims/, run beside the record workers: the claims
    behind the list's numbers are then already checked when the plan needs them."""
    from .policy import check_files

    try:
        text = list_path.read_bytes().decode("utf-8")
        listing = parse_list(text, str(list_path))
    except (OSError, UnicodeDecodeError, ListError):
        return None  # _audit_list reports the list itself
    from .publish import Hashes

    files = sorted(p for p in (root / "claims").rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())
    hashes = Hashes(root)
    for f in files:
        hashes.get(f.relative_to(root).as_posix())
    return {"text": text, "checks": check_files(files, root, listing), "hashes": hashes.memo}


def _audit_list(root, list_path, results_dir, checked, allow_dirty, max_per_entry, cache,
                known=None) -> list[Problem]:
    from .publish import build_plan, shown_path

    shown_results = shown_path(results_dir, root)
    problems = [Problem(f"{shown_results}/{s.path}", 1, key, msg) for s, probs in checked for key, msg in probs]
    summaries = [s for s, _ in checked]
    shown_list = shown_path(list_path, root)
    try:
        text = list_path.read_bytes().decode("utf-8")
        listing = parse_list(text, shown_list)
        same_list = known is not None and known["text"] == text
        plan = build_plan(root, list_path, results_dir, text, summaries, allow_dirty=allow_dirty,
                          max_per_entry=max_per_entry, cache=cache, known_checks=known["checks"] if same_list else None,
                          known_hashes=known["hashes"] if known is not None else None)
    except ListError as e:
        return problems + [Problem(shown_list, e.line, "list", str(e).removeprefix(f"{e.path}:{e.line}: "))]
    except (OSError, UnicodeDecodeError) as e:
        return problems + [Problem(shown_list, 1, "list", f"cannot read the list: {e}")]
    problems += list(plan.problems)
    by_path = {s.path: s for s in summaries}
    for entry in listing.entries:
        key, want = plan.expected[entry.line]
        have = read_region(entry)
        if have != ((key, want) if want is not None else None):
            problems += _diagnose(shown_list, entry, have, want, plan, by_path, list_path, results_dir)
    return problems


def _diagnose(shown, entry: Entry, have, want, plan, by_path, list_path, results_dir) -> list[Problem]:
    """Say what is wrong with one entry's region, most specific reason first."""
    def p(msg: str) -> Problem:
        return Problem(shown, entry.line, entry.key, msg)

    if have is None:
        return [p(f"publish would show {want!r} here, but the list has no number; run claimbench publish")]
    key, content = have
    out = []
    if key != entry.key:
        out.append(p(f"marker key {key!r} is not this entry's key {entry.key!r}: moved or written by hand"))
    links_have = _links(content, list_path, results_dir)
    links_want = _links(want or "", list_path, results_dir)
    for rel in [r for r in links_have if r not in links_want]:
        out.append(p(f"shows a number that no current verified record backs: {_why(rel, plan, by_path)}"))
    for rel in [r for r in links_want if r not in links_have]:
        out.append(p(f"lacks the number from {plan.results_shown}/{rel}, a current verified record; "
                     "run claimbench publish"))
    if not links_have and content.strip() and want is None:
        out.append(p(f"shows {content!r} inside the markers, but no current verified record backs a number here"))
    elif not out and content != want:
        out.append(p(f"hand-edited text inside the markers: the list has {content!r}, "
                     f"publish writes {want!r}"))
    return out


def _links(content: str, list_path: Path, results_dir: Path) -> list[str]:
    """Record links in a region, as paths relative to the results folder (or as written)."""
    base, res = list_path.resolve().parent, results_dir.resolve()
    out = []
    for link in _LINK.findall(content):
        target = (base / link).resolve()
        out.append(target.relative_to(res).as_posix() if target.is_relative_to(res) else link)
    return out


def _why(rel: str, plan, by_path) -> str:
    s = by_path.get(rel)
    shown = f"{plan.results_shown}/{rel}"
    if s is None:
        return f"it links {rel}, which is not a record in {plan.results_shown}"
    if not s.ok:
        return f"it links an unreadable record: {s.error}"
    if rel in plan.why_not:
        return f"record {shown}: {plan.why_not[rel]}"
    if s.verdict != Status.VERIFIED.value:
        return f"record {shown} is {s.verdict}, not verified"
    if any(n.record == rel for n in plan.hidden):
        return f"record {shown} is over the limit of numbers per entry"
    return f"record {shown} is not the latest current verified record for {s.claim_id} on {s.hardware}"

