"""Audit: prove that every number in the list is backed, and that every record says what it holds.

CI runs this on every pull request, on CPU. It reads every record file itself (never the index),
recomputes each verdict, value and CI from the record's own samples (`recordcheck`), judges which
records stand exactly as publish does (`standing.judge`, through `publish.build_plan`),
recomputes what publish would write, and compares that with the list. Every failure is a
located `Problem`: a record that does not stand (forged, misplaced, from the future, at odds
with its claim, changed since it was committed), a file under results/records/ that is not a
record, a committed record that was deleted, every number the list shows wrongly, and every
record link written outside publish's marker regions (`_links_outside`). Records
are checked in chunks on two worker processes; results are cached under `results/.cache/`
(`store/auditcache`: by sha256, and by stat for a file that has not changed since it was read,
under a fingerprint of the checking code; a read-only results folder only skips the cache). CI
starts without the cache, and a cache that git tracks is never read.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Callable, Optional

from claimbench.spec.bounded import UnreadableFile, read_text
from claimbench.spec.listhazards import hazards
from claimbench.spec.listing import (
    Entry,
    ListError,
    links_outside_regions,
    mentions_outside_regions,
    parse_list,
    read_region,
)
from claimbench.spec.mdscan import link_targets
from claimbench.spec.problem import Problem
from claimbench.stats.status import Status
from claimbench.store import auditcache
from claimbench.store.index import paused_gc
from claimbench.store.recordcheck import (  # noqa: F401 (audit's public checks)
    check_record,
    check_record_files,
    check_records,
    fingerprint,
)
from claimbench.store.scan import scan_tree
from claimbench.store.summary import Summary

CACHE_DIR = ".cache"


def audit_records(results: Path, *, workers: int = 2, cache: bool = True, side: Optional[Callable] = None,
                   paths: Optional[list] = None) -> tuple[list[tuple[Summary, list]], object]:
    """Read, hash and check every record file; (summary, [(key, message)]) for each, by path.

    A file the cache finds by its stat is not read (`store/auditcache`); the others go to the
    workers. ``side``, a picklable callable, runs on one of the workers while the others read
    records, so the serial work after this (checking the claims) is already done; its result
    comes second (None when there were too few records to start workers)."""
    results = Path(results)
    cfile = results / CACHE_DIR / f"audit-{fingerprint()}.jsonl"
    cached = auditcache.load(cfile if cache else None)
    paths = scan_tree(results)[0] if paths is None else paths
    out: list = [None] * len(paths)
    lines: dict[str, bytes] = {}  # sha256 -> cache line
    todo: list[tuple[int, str, str]] = []
    with paused_gc():
        for i, (rel, full) in enumerate(paths):
            hit = cached.unchanged(rel, full)
            if hit is None:
                todo.append((i, rel, full))
                continue
            e, st = hit
            out[i] = (auditcache.summary_of(e, rel, st.st_size, mtime_ns=st.st_mtime_ns), e.problems)
            lines[e.sha256] = e.line
    items = [(rel, full) for _, rel, full in todo]
    slots = iter([i for i, _, _ in todo])
    side_out: list = []
    with paused_gc():  # the workers' rows are unpickled here: 100,000 summaries, no cycle among them
        for rows in check_record_files(items, workers, frozenset(cached.by_sha), side=side, side_out=side_out):
            _collect(rows, cached.by_sha, out, slots=slots, lines=lines)
    side_result = side_out[0] if side_out else None
    if cache and (todo or lines.keys() != cached.by_sha.keys()):
        auditcache.save(cfile, list(lines.values()))
    return out, side_result


def _collect(rows, by_sha: dict, out: list, *, slots, lines: dict) -> None:
    """Summaries and problems into their slots of ``out``; every record's cache line into ``lines``."""
    with paused_gc():
        for rel, size, mtime, sha, s, probs, line, key in rows:
            if s is None:  # known by its sha256: moved, copied, or touched since
                e = by_sha[sha]
                s, probs, lines[sha] = auditcache.summary_of(e, rel, size, mtime_ns=mtime), e.problems, auditcache.relined(e, rel, key)
            elif sha and line:
                lines[sha] = line
            out[next(slots)] = (s, probs)


def audit(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
          max_per_entry: int = 3, workers: int = 2, cache: bool = True, now: Optional[str] = None) -> list[Problem]:
    """Every reason the list or the records cannot be trusted; empty when all is well."""
    return audit_report(root, list_path, results_dir, allow_dirty=allow_dirty, max_per_entry=max_per_entry,
                        workers=workers, cache=cache, now=now)[0]


def audit_report(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
                 max_per_entry: int = 3, workers: int = 2, cache: bool = True,
                 now: Optional[str] = None, base: Optional[str] = None) -> tuple[list[Problem], list]:
    """(problems, [(summary, record problems)] for every record file checked)."""
    from claimbench.report.publish import carried_why, shown_path
    from claimbench.store.provenance import carried_state, changed_tracked_records, tracked_links

    root, list_path, results_dir = Path(root), Path(list_path), Path(results_dir)
    tracked = changed_tracked_records(root, results_dir, base=base)  # first: a base git does not know stops here
    carried = carried_state(results_dir)
    cache = cache and not carried  # a cache the clone carries is someone else's word: ignored, and a problem
    paths, strays = scan_tree(results_dir)
    checked, known = audit_records(results_dir, workers=workers, cache=cache, paths=paths,
                                    side=partial(_check_claim_files, root, list_path))
    with paused_gc():  # a million live objects from the records: every collection would walk them all
        problems = _audit_list(root, list_path, results_dir, checked=checked, allow_dirty=allow_dirty,
                               max_per_entry=max_per_entry, cache=cache, known=known,
                               now=now, strays=strays, tracked=tracked)
    at = shown_path(results_dir, root)
    problems += [Problem(f"{at}/{path}", 1, "cache", carried_why(f"{at}/{path}")) for path in carried]
    problems += [Problem(link, 1, "link", "a symbolic link that git tracks under the results folder: claimbench never "
                         "makes one, and every write through it lands where whoever committed it chose; untrack it with "
                         f"`git rm --cached {link}`") for link in tracked_links(root, results_dir)]
    return problems, checked


def _check_claim_files(root: Path, list_path: Path) -> Optional[dict]:
    """`gate_file` of every claim file under claims/, run beside the record workers: the claims
    behind the list's numbers are then already checked when the plan needs them."""
    from claimbench.gate.claimfiles import discover
    from claimbench.gate.gateall import gate_files
    from claimbench.report.standing import Hashes

    try:
        text = read_text(list_path, what="list")
        listing = parse_list(text, str(list_path))
    except (UnreadableFile, ListError):
        return None  # _audit_list reports the list itself
    files = discover([], root)
    hashes = Hashes(root)
    for f in files:
        try:
            hashes.get(f.resolve().relative_to(Path(root).resolve()).as_posix())
        except ValueError:
            continue
    return {"text": text, "checks": gate_files(files, root, listing), "hashes": hashes.memo}


def _audit_list(root, list_path, results_dir, *, checked, allow_dirty, max_per_entry, cache,
                known=None, now=None, strays=(), tracked=None) -> list[Problem]:
    from claimbench.report.publish import build_plan, shown_path

    shown_results = shown_path(results_dir, root)
    intrinsic = {s.path: probs for s, probs in checked}
    summaries = [s for s, _ in checked]
    shown_list = shown_path(list_path, root)

    def plan_for(text: str):
        same_list = known is not None and known["text"] == text
        return build_plan(root, list_path, results_dir, text=text, summaries=summaries, allow_dirty=allow_dirty,
                          max_per_entry=max_per_entry, cache=cache, known_checks=known["checks"] if same_list else None,
                          known_hashes=known["hashes"] if known is not None else None,
                          verify=lambda ss: {s.path: (s, intrinsic.get(s.path) or []) for s in ss},
                          now=now, strays=strays, tracked=tracked)

    list_problems: list[Problem] = []
    listing = plan = None
    try:
        text = read_text(list_path, what="list")
        listing = parse_list(text, shown_list)
        plan = plan_for(text)
    except ListError as e:
        list_problems.append(Problem(shown_list, e.line, "list", str(e).removeprefix(f"{e.path}:{e.line}: ")))
    except UnreadableFile as e:
        list_problems.append(Problem(shown_list, 1, "list", f"cannot read the list: {str(e).removeprefix(f'{list_path}')}"))
    if plan is None:  # the records are judged all the same, against a list with no entries
        plan = plan_for("")
    problems = _record_problems(shown_results, intrinsic, plan, strays=strays, tracked=tracked or {})
    if listing is None:
        return problems + list_problems
    problems += list(plan.problems) + _links_outside(text, shown_list, list_path=list_path, results_dir=results_dir)
    problems += [Problem(shown_list, line, "list", why) for line, why in hazards(text, f"{results_dir.name}/records/")]
    by_path = {s.path: s for s in summaries}
    for entry in listing.entries:
        key, want = plan.expected[entry.line]
        have = read_region(entry)
        if have != ((key, want) if want is not None else None):
            problems += _diagnose(shown_list, entry, have, want=want, plan=plan, by_path=by_path,
                                  list_path=list_path, results_dir=results_dir)
    return problems


def _record_problems(at: str, intrinsic: dict, plan, *, strays, tracked: dict) -> list[Problem]:
    """Each record's problems (its own, then the judgement's), strays and deleted committed records."""
    refused: dict[str, list] = {}
    for path, key, msg in plan.refused:
        refused.setdefault(path, []).append((key, msg))
    out = []
    for path in sorted(set(intrinsic) | set(refused)):
        seen = []
        for key, msg in list(intrinsic.get(path) or []) + refused.get(path, []):
            if (key, msg) not in seen:
                seen.append((key, msg))
                out.append(Problem(f"{at}/{path}", 1, key, msg))
    out += [Problem(f"{at}/{path}", 1, "file", why) for path, why in strays]
    out += [Problem(f"{at}/{path}", 1, "record", f"{how}; committed evidence is immutable: "
                    f"restore it with `git checkout -- {at}/{path}`") for path, how in sorted(tracked.items())
            if path not in intrinsic]
    return out


def _diagnose(shown, entry: Entry, have, *, want, plan, by_path, list_path, results_dir) -> list[Problem]:
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
    for _, link in link_targets(content):
        rel = _in_results(link, base, res)
        out.append(link if rel is None else rel)
    return out


def _in_results(link: str, base: Path, res: Path) -> str | None:
    """``link``, read from the list's folder, as a path relative to the results folder, or None.

    A link that is no path at all (a NUL byte, a loop of symbolic links) is None: it names no
    record, and the caller says so as a located problem rather than stopping on a traceback."""
    try:
        target = (base / link).resolve()
    except (ValueError, OSError, RuntimeError):
        return None
    return target.relative_to(res).as_posix() if target.is_relative_to(res) else None


def _links_outside(text: str, shown: str, *, list_path: Path, results_dir: Path) -> list[Problem]:
    """A problem for each link into the results folder that sits outside every marker region.

    Why: audit checks numbers region by region; a number with its record link written on a
    continuation line or in a description would look verified while nothing checks it. A link
    counts when it resolves into the results folder or names its records folder anywhere in it
    (a URL to the repository's copy, a path from elsewhere)."""
    base, res = list_path.resolve().parent, results_dir.resolve()
    records = f"{results_dir.name}/records/".casefold()
    out = [Problem(shown, line, "list", f"a record link outside the markers: numbers are written only by "
                   f"claimbench publish, between its markers; remove the link {_printable(target)} and the "
                   "number with it, then run claimbench publish to write the entry's number")
           for line, target in links_outside_regions(text)
           if records in target.casefold() or (not target.startswith("#") and "://" not in target
                                               and _in_results(target.lstrip("<"), base, res) is not None)]
    seen = {p.line for p in out}
    return out + [Problem(shown, line, "list", f"names {results_dir.name}/records/ outside the markers (a raw HTML link, "
                          "a bare URL or text): numbers and their records are written only by claimbench publish, "
                          f"between its markers; remove it, or write the folder's name as code (`{results_dir.name}/"
                          "records/`) in prose")
                  for line in mentions_outside_regions(text, f"{results_dir.name}/records/") if line not in seen]


def _printable(link: str, limit: int = 120) -> str:
    """The link as a message can show it: control characters escaped, a long one cut."""
    shown = link if len(link) <= limit else link[:limit] + "…"
    return shown if shown.isprintable() else ascii(shown)


def _why(rel: str, plan, by_path) -> str:
    s = by_path.get(rel)
    shown = f"{plan.results_shown}/{rel}"
    if s is None:
        return f"it links {_printable(rel)}, which is not a record in {plan.results_shown}"
    if not s.ok:
        return f"it links an unreadable record: {s.error}"
    if rel in plan.why_not:
        return f"record {shown}: {plan.why_not[rel]}"
    if s.verdict != Status.VERIFIED.value:
        return f"record {shown} is {s.verdict}, not verified"
    if any(n.record == rel for n in plan.hidden):
        return f"record {shown} is over the limit of numbers per entry"
    return f"record {shown} is not the latest current verified record for {s.claim_id} on {s.hardware}"

