"""Publish: put each verified, current number on its list entry, and take every other one off.

Which records count is `standing.judge`, the judgement audit uses too, so publish never shows a
number audit would reject: before a record's number goes on the list, the record is read again
from disk and checked like audit checks it (its verdict recomputed from its samples), whatever
the index said.
Each number reads `value [95% CI] vs baseline · kernel · machine · dtype · [record](...)`, then
`dirty`, `no sandbox` or `no floor` (no physics floor held the number) where they apply, all
text from claims and records escaped (`safetext.markdown`). Numbers go in one marker region per
entry, most recent first, at most `max_per_entry`. `publish` reads records only, runs nothing,
writes the list atomically and only if it did not change on disk meanwhile, and fails (exit 1)
when it refused a record or took a number off.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from claimbench.errors import UserError
from claimbench.orchestrator import census
from claimbench.report.standing import (  # noqa: F401 (re-exported)
    VERIFIED,
    ClaimFacts,
    Hashes,
    Judgement,
    claim_ids,
    is_dirty,
    judge,
    not_current,
    show_order,
    superseded,
)
from claimbench.spec.bounded import read_text
from claimbench.spec.display import dtype_short, format_number
from claimbench.spec.listing import Entry, Listing, apply, parse_list, read_region
from claimbench.spec.mdscan import link_targets
from claimbench.spec.problem import Problem
from claimbench.spec.safetext import markdown, plain
from claimbench.store.atcommit import MEMO_NAME, CommitFiles
from claimbench.store.index import read_index
from claimbench.store.summary import Summary


class ListChanged(UserError):
    """The list changed on disk while publish ran; it is left as the other writer left it."""


@dataclass(frozen=True)
class Number:
    """One published number: which record backs which entry, and the text the list shows."""

    claim_id: str
    entry_key: str
    entry_line: int
    hardware: str
    created_utc: str
    record: str  # relative to the results folder
    text: str  # Markdown, escaped
    dirty: bool
    machine: str = ""
    parts: tuple = ()  # (value and interval, kernel, machine, dtype, record path) as plain text: terminals, HTML
    order: tuple = ()  # `standing.show_order`: an entry shows its most recent numbers first


@dataclass(frozen=True)
class Removal:
    """A number that comes off (or stays off) the list, and why."""

    claim_id: str
    hardware: str
    record: str  # the newest verified record whose number is not shown
    why: str
    machine: str = ""


@dataclass(frozen=True)
class PublishPlan:
    list_path: Path
    text: str
    new_text: str
    numbers: tuple[Number, ...]
    hidden: tuple[Number, ...]  # verified and current, but over max_per_entry
    removed: tuple[Removal, ...]
    corrupt: tuple[Summary, ...]
    problems: tuple[Problem, ...]
    expected: dict  # entry line -> (region key, content or None), for every entry of the list
    why_not: dict  # record path -> why it backs no number (records that are not current)
    cleared: tuple[tuple[str, str], ...] = ()  # (entry key, old content) of regions taken off
    results_shown: str = "results"  # the results folder as messages name it
    refused: tuple[tuple[str, str, str], ...] = ()  # (record path, key, message): records that do not stand
    strays: tuple[tuple[str, str], ...] = ()  # (path, why): files under records/ that are not records
    tampered: tuple[tuple[str, str], ...] = ()  # (claim id, why): committed evidence changed
    taken_off: tuple[tuple[str, str], ...] = ()  # (entry key, record link) that left the list
    carried: tuple[str, ...] = ()  # caches or the index that git tracks under results/: ignored
    swept: tuple[str, ...] = ()  # temp files a killed publish left beside the list, removed (`clean_temps`)

    @property
    def changed(self) -> bool:
        return self.new_text != self.text

    @property
    def failed(self) -> bool:
        """Exit 1: a record was refused, committed evidence changed, a number came off, or the
        clone carries caches (ignored, but someone committed them)."""
        return bool(self.refused or self.strays or self.tampered or self.taken_off or self.cleared or self.carried)

    def lines(self, dry_run: bool = False) -> list[str]:
        """The report: what is shown, what came off and why, what was refused."""
        state = ("list would change" if dry_run else "list updated") if self.changed else "list unchanged"
        entries = len({n.entry_line for n in self.numbers})
        refused = len({r[0] for r in self.refused}) + len(self.strays)
        out = [f"{self.list_path}: {len(self.numbers)} number{'s' * (len(self.numbers) != 1)} on {entries} "
               f"entr{'y' if entries == 1 else 'ies'}; {len(self.removed)} off; {refused} refused; {state}"]
        at = self.results_shown
        out += [f"  + {plain(n.entry_key)}: {' · '.join(n.parts)}" for n in self.numbers]
        out += [f"  . {plain(n.entry_key)}: over the per-entry limit, not shown: {at}/{n.record}" for n in self.hidden]
        out += [f"  - {plain(key)}: taken off, no current verified record backs it: {plain(old)}" for key, old in self.cleared]
        out += [f"  - {plain(key)}: took off the number from {plain(link)}" for key, link in self.taken_off]
        out += [f"  - {plain(r.claim_id)} on {plain(r.machine or r.hardware)}: {plain(r.why)} ({at}/{plain(r.record)})" for r in self.removed]
        out += [f"  ! refused {at}/{plain(path)}: {plain(key)}: {plain(msg)}" for path, key, msg in self.refused]
        out += [f"  ! not a record: {at}/{plain(path)}: {plain(why)}" for path, why in self.strays]
        out += [f"  ! ignored {at}/{plain(path)}: {carried_why(f'{at}/{plain(path)}')}" for path in self.carried]
        out += [f"  ! committed evidence of {plain(cid)} changed: {plain(why)}; restore it" for cid, why in self.tampered]
        out += [f"  ! {plain(str(p))}" for p in self.problems]  # claim keys may hold anything
        out += [f"  . removed {plain(path)}: a temp file of a publish that is no longer running" for path in self.swept]
        return out


def plan(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
         max_per_entry: int = 3, text: Optional[str] = None, now: Optional[str] = None) -> PublishPlan:
    """What publish would write, from the index of records; nothing but caches is written."""
    from claimbench.store.provenance import carried_state, changed_tracked_records
    from claimbench.store.recordcheck import Verifier

    results_dir = Path(results_dir)
    carried = tuple(carried_state(results_dir))  # then no cache nor index line is believed, nor rewritten
    index = read_index(results_dir, use_index=not carried, repair=not carried)
    if text is None:
        text = read_text(list_path, what="list")
    p = build_plan(root, list_path, results_dir, text=text, summaries=index.summaries, allow_dirty=allow_dirty,
                   max_per_entry=max_per_entry, verify=Verifier(results_dir, cache=not carried), now=now,
                   strays=index.strays, tracked=changed_tracked_records(root, results_dir), cache=not carried)
    return replace(p, carried=carried)


def carried_why(shown: str) -> str:
    """Why a cache or index file that git tracks is ignored, and how to untrack it."""
    return ("committed to git, but caches and the index are this machine's local state, never evidence "
            f"(a committed one could vouch for a forged record); untrack it with `git rm -r --cached {shown}`")


def build_plan(root: Path, list_path: Path, results_dir: Path, *, text: str,
               summaries: Sequence[Summary], allow_dirty: bool = False,
               max_per_entry: int = 3, cache: bool = True, known_checks: Optional[dict] = None,
               known_hashes: Optional[dict] = None, verify: Optional[Callable] = None, now: Optional[str] = None,
               strays: Sequence = (), tracked: Optional[dict] = None) -> PublishPlan:
    """The plan from given summaries (audit passes ones it read and checked itself; `verify`
    answers for each record about to decide). Raises ListError."""
    from claimbench.gate.gatecache import gate_cached
    from claimbench.gate.srcgraph import resolving

    root, list_path, results_dir = Path(root), Path(list_path), Path(results_dir)
    listing = parse_list(text, str(list_path))
    hashes = Hashes(root, known_hashes)
    sources: dict[str, dict] = {}
    for s in summaries:
        if s.ok and hashes.get(s.claim_path) == s.claim_sha256:
            sources.setdefault(s.claim_path, s.source_sha256)
    paths = sorted(sources)
    checked = dict(zip(paths, gate_cached(paths, root, listing, sources=sources, known=known_checks,
                                           cache_dir=results_dir / ".cache" if cache else None)))
    with resolving():  # one judgement, one pass: each claim's named files resolve the same root (0.5 s at 2,000 claims)
        j = judge(summaries, hashes=hashes, claims_by_id=claim_ids(root), facts=_facts(checked, results_dir, root),
                  verify=verify or (lambda ss: {}), now=now, allow_dirty=allow_dirty, tracked=tracked,
                  shown_on=_entry_line(listing, checked), cap=max_per_entry,
                  commits=CommitFiles(root, memo=results_dir / ".cache" / MEMO_NAME if cache else None))
    at = shown_path(results_dir, root)
    removed = [Removal(g[0], s.hardware, s.path, why, g[1]) for g, s, why in superseded(j, at)]
    numbers, problems = _attach(root, list_path, results_dir, listing=listing, winners=j.winners(), removed=removed,
                                why_not=j.why_not, checked=checked)
    refused = tuple((path, key, msg) for path in sorted(j.refused) for key, msg in j.refused[path])
    return _finish(list_path, text, listing, numbers=numbers, removed=removed, summaries=summaries, problems=problems,
                   j=j, cap=max_per_entry, at=at, refused=refused, strays=tuple(strays), results_dir=results_dir)


def _facts(checked: dict, results_dir: Path, root: Path) -> Callable[[str], Optional[ClaimFacts]]:
    from functools import lru_cache

    from claimbench.gate.srcgraph import named_files
    from claimbench.store.claimcopy import claim_digest, expected_copy, record_differences
    from claimbench.store.record import load_record

    memo: dict = {}

    def facts(path: str) -> Optional[ClaimFacts]:
        if path not in memo:
            r = checked.get(path)
            claim = r.claim if r is not None else None
            if claim is None or expected_copy(claim) is None:
                memo[path] = None
            else:
                # per digest form and sweep point: a sweep point's record copies its own flops and bytes
                # (the value's type is part of the key: 4096 and 4096.0 hash alike but are different points)
                by_form = lru_cache(maxsize=32)(lambda form, at, _type, c=claim: claim_digest(c, form, at=at))
                memo[path] = ClaimFacts(path, lambda like, at=None, d=by_form: d(like[:2], at, type(at and at[1])),
                                        lambda rec, c=claim: record_differences(load_record(results_dir / rec), c),
                                        files=named_files(claim, root))
        return memo[path]
    return facts


def _entry_line(listing: Listing, checked: dict) -> Callable[[Summary], Optional[int]]:
    """The list line a record's number goes on: its claim's entry, when the claim passes check."""
    memo: dict = {}

    def line(s: Summary) -> Optional[int]:
        if s.claim_path not in memo:
            r = checked.get(s.claim_path)
            memo[s.claim_path] = listing.find(r.claim.entry).line if r is not None and r.ok else None
        r = checked.get(s.claim_path)
        return memo[s.claim_path] if r is not None and r.claim is not None and r.claim.id == s.claim_id else None
    return line


def _attach(root, list_path, results_dir, *, listing: Listing, winners, removed, why_not, checked):
    """Tie each winning record to its entry through its claim, which must still pass check."""
    numbers = []
    problems: list[Problem] = []
    prefix = Path(os.path.relpath(results_dir.resolve(), list_path.resolve().parent)).as_posix()
    entries: dict[str, Entry] = {}  # claim file -> its entry; Listing.find scans every entry
    for s in winners:
        r = checked[s.claim_path]
        if not r.ok or r.claim is None or r.claim.id != s.claim_id:
            first = r.problems[0] if r.problems else f"claim id is not {s.claim_id}"
            why = f"claim {s.claim_path} no longer passes check: {first}"
            why_not[s.path] = why
            removed.append(Removal(s.claim_id, s.hardware, s.path, why, s.machine))
            problems.extend(r.problems or (Problem(s.claim_path, 1, "id", why),))
            continue
        if s.claim_path not in entries:
            entries[s.claim_path] = listing.find(r.claim.entry)  # check passed, so it resolves
        entry = entries[s.claim_path]
        dirty = is_dirty(s)
        link = s.path if prefix == "." else f"{prefix}/{s.path}"
        value = format_number(s.metric, float(s.published_value), s.ci_low, ci_high=s.ci_high, floor_term=s.floor_term,
                              baseline=markdown(r.claim.baseline.name))
        # a run whose sides were not confined (no bubblewrap) is still verified, but a reader should know
        # and a number no physics floor stood behind (no flops or bytes, or no ceiling) says so (issue 22)
        flags = (["dirty"] if dirty else []) + (["no sandbox"] if s.sandbox.startswith("none") else []) \
            + (["no floor"] if not s.floor_us else [])
        parts = (format_number(s.metric, float(s.published_value), s.ci_low, ci_high=s.ci_high, floor_term=s.floor_term,
                               baseline=plain(r.claim.baseline.name)), plain(r.claim.kernel.name), plain(s.machine),
                 dtype_short(plain(s.dtype)), link) + tuple(flags)
        text = " · ".join([value, markdown(r.claim.kernel.name), markdown(s.machine), markdown(dtype_short(s.dtype)),
                           f"[record]({link})"] + flags)
        numbers.append(Number(s.claim_id, entry.key, entry.line, s.hardware, s.created_utc, s.path,
                              text, dirty, s.machine, parts, show_order(s)))
    return numbers, problems


def _finish(list_path, text, listing, *, numbers, removed, summaries, problems, j: Judgement, cap,
            at, refused, strays, results_dir) -> PublishPlan:
    by_line: dict[int, list[Number]] = {}
    for n in numbers:
        by_line.setdefault(n.entry_line, []).append(n)
    shown, hidden, expected, updates, cleared, off = [], [], {}, {}, [], []
    for entry in listing.entries:
        ns = sorted(by_line.get(entry.line, []), key=lambda n: n.order, reverse=True)
        shown += ns[:cap]
        hidden += ns[cap:]
        content = "; ".join(n.text for n in ns[:cap]) or None
        expected[entry.line] = (entry.key, content)
        old = read_region(entry)
        if old != ((entry.key, content) if content is not None else None):
            updates[entry.line] = (entry.key, content)
            if content is None:
                assert old is not None  # it differs from no region
                cleared.append((entry.key, old[1]))
            else:
                still = {n.claim_id for n in ns}
                off += [(entry.key, link) for _, link in link_targets(old[1] if old else "")
                        if link not in content and _claim_of(link) not in still]
    new_text = apply(text, updates, str(list_path)) if updates else text
    corrupt = tuple(s for s in summaries if not s.ok)
    return PublishPlan(list_path, text, new_text, tuple(shown), tuple(hidden), tuple(removed),
                       corrupt, tuple(problems), expected, j.why_not, tuple(cleared), at, refused,
                       strays, tuple(sorted(j.tampered.items())), tuple(off))


def _claim_of(link: str) -> str:
    parts = link.split("/")
    return parts[-2] if len(parts) >= 2 else ""


def shown_path(path: Path, root: Path) -> str:
    """`path` relative to the project root when it is inside it, as messages show it."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def publish(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
            max_per_entry: int = 3, dry_run: bool = False, now: Optional[str] = None) -> PublishPlan:
    """Plan, then replace the list atomically; refuse if it changed on disk meanwhile."""
    list_path = Path(list_path)
    swept = () if dry_run else tuple(str(p) for p in clean_temps(list_path))
    before = read_text(list_path, what="list").encode("utf-8")
    st = os.stat(list_path)
    p = plan(root, list_path, results_dir, allow_dirty=allow_dirty, max_per_entry=max_per_entry,
             text=before.decode("utf-8"), now=now)
    p = replace(p, swept=swept)
    if dry_run or not p.changed:
        return p
    _replace_if_unchanged(list_path, p.new_text.encode("utf-8"), before, st=st)
    return p


def _temp_prefix(path: Path) -> str:
    """The start of the temp file's name `_replace_if_unchanged` writes beside the list: the pid
    in it tells `clean_temps` whether its writer is still running."""
    return f".{path.name}.{os.getpid()}."


def _own_temp(list_path: Path) -> re.Pattern:
    """Exactly the names `_replace_if_unchanged`'s mkstemp makes: `.<list>.<pid>.` then mkstemp's
    8 random characters (lower-case letters, digits, `_`) then `.tmp`. Any other name beside the
    list, `.LIST.md.backup.tmp` or `.LIST.md.2024.draft.tmp`, is someone else's file."""
    return re.compile(rf"\.{re.escape(list_path.name)}\.(?P<pid>[1-9][0-9]{{0,6}})\.[a-z0-9_]{{8}}\.tmp")


def clean_temps(list_path: Path) -> list[Path]:
    """Remove the temp files a killed publish left beside the list, and return them: only names
    this module's own mkstemp makes (`_own_temp`), only regular files, and only where the pid in
    the name is not running. A running pid keeps its file (a publish under way, or a reused pid:
    a file left for a later publish is harmless); a file of any other name is left alone, whatever
    its age: publish removes only files it wrote."""
    gone: list[Path] = []
    own = _own_temp(list_path)
    try:
        entries = list(os.scandir(list_path.parent))
    except OSError:
        return gone
    for e in entries:
        m = own.fullmatch(e.name)
        if not m or not e.is_file(follow_symlinks=False) or census.alive(int(m.group("pid"))):
            continue
        try:
            os.unlink(e.path)
        except OSError:
            continue
        gone.append(Path(e.path))
    return gone


def _replace_if_unchanged(path: Path, data: bytes, before: bytes, *, st: os.stat_result) -> None:
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(path), suffix=".tmp", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, st.st_mode & 0o777)
        now = os.stat(path)
        if (now.st_mtime_ns, now.st_size, now.st_ino) != (st.st_mtime_ns, st.st_size, st.st_ino) \
                or path.read_bytes() != before:
            raise ListChanged(f"{path} changed on disk while publish ran; left it untouched; run publish again")
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise UserError(f"{path}: cannot write the list ({e.strerror or e}); it was left unchanged") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
