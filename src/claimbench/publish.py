"""Publish: put each verified, current number on its list entry, and take every other one off.

For one claim on one kind of hardware, the latest *current* measured record decides: if it is not
`verified`, the number comes off, so rerunning until lucky does not pay. Current means its hashes
(the claim file and every source file it imported) still match the files, its protocol is not
below `MIN_PROTOCOL_VERSION`, and its tree was clean (a dirty one only with `allow_dirty`, and
then labelled). Numbers go in one marker region per entry, most recent first, at most
`max_per_entry`. `publish` reads records only, runs nothing, and writes the list atomically, and
only if the list did not change on disk while it ran.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from .display import dtype_short, format_value, safe_text
from .errors import UserError
from .index import Summary, read_index
from .listing import Listing, apply, parse_list, read_region
from .problem import Problem
from .record import MIN_PROTOCOL_VERSION, sha256_file
from .status import Status

VERIFIED = Status.VERIFIED.value


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
    text: str
    dirty: bool


@dataclass(frozen=True)
class Removal:
    """A number that comes off (or stays off) the list, and why."""

    claim_id: str
    hardware: str
    record: str  # the newest verified record whose number is not shown
    why: str


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

    @property
    def changed(self) -> bool:
        return self.new_text != self.text

    def lines(self, dry_run: bool = False) -> list[str]:
        """The report: what is shown, what came off and why, what could not be read."""
        state = ("list would change" if dry_run else "list updated") if self.changed else "list unchanged"
        out = [f"{self.list_path}: {_count(len(self.numbers), 'number', 'numbers')} on "
               f"{_count(len({n.entry_line for n in self.numbers}), 'entry', 'entries')}; {len(self.removed)} off; "
               f"{len(self.corrupt)} unreadable record(s); {state}"]
        out += [f"  + {n.entry_key}: {n.text}" for n in self.numbers]
        out += [f"  . {n.entry_key}: not shown, over the per-entry limit: {n.text}" for n in self.hidden]
        out += [f"  - {key}: taken off, no current verified record backs it: {old}" for key, old in self.cleared]
        out += [f"  - {r.claim_id} on {r.hardware}: {r.why} ({self.results_shown}/{r.record})" for r in self.removed]
        out += [f"  ! unreadable record skipped: {s.error}" for s in self.corrupt]
        out += [f"  ! {p}" for p in self.problems]
        return out


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def is_dirty(s: Summary) -> bool:
    """Only a known-clean commit counts as clean; an unknown tree is treated as dirty."""
    return s.git_dirty is not False or not s.git_commit


class Hashes:
    """sha256 of project files, each read once per run; None for a missing file or one outside root."""

    def __init__(self, root: Path, known: Optional[dict] = None):
        self.root = Path(root).resolve()
        self._memo: dict[str, Optional[str]] = dict(known or {})  # `known`: another Hashes' memo

    @property
    def memo(self) -> dict:
        return dict(self._memo)

    def get(self, rel: str) -> Optional[str]:
        if rel not in self._memo:
            p = (self.root / rel).resolve()
            ok = p.is_relative_to(self.root) and p.is_file()
            self._memo[rel] = sha256_file(p) if ok else None
        return self._memo[rel]


def not_current(s: Summary, hashes: Hashes, allow_dirty: bool) -> list[str]:
    """Why a record may not decide what the list shows; empty when it is current."""
    why = []
    if s.protocol_version < MIN_PROTOCOL_VERSION:
        why.append(f"protocol {s.protocol_version} is older than the minimum {MIN_PROTOCOL_VERSION}")
    changed = [rel for rel, h in [(s.claim_path, s.claim_sha256), *sorted(s.source_sha256.items())]
               if hashes.get(rel) != h]
    if changed:
        gone = [rel for rel in changed if hashes.get(rel) is None]
        what = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
        why.append(f"stale hash: {what} {'changed or is gone' if gone else 'changed'} since the run")
    if is_dirty(s) and not allow_dirty:
        why.append("from a dirty or unknown git tree; rerun from a clean commit, or pass --allow-dirty")
    return why


def plan(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
         max_per_entry: int = 3, text: Optional[str] = None) -> PublishPlan:
    """What publish would write, from the index of records; nothing is written."""
    index = read_index(Path(results_dir))
    if text is None:
        text = Path(list_path).read_bytes().decode("utf-8")
    return build_plan(root, list_path, results_dir, text, index.summaries,
                      allow_dirty=allow_dirty, max_per_entry=max_per_entry)


def build_plan(root: Path, list_path: Path, results_dir: Path, text: str,
               summaries: Sequence[Summary], *, allow_dirty: bool = False,
               max_per_entry: int = 3, cache: bool = True, known_checks: Optional[dict] = None,
               known_hashes: Optional[dict] = None) -> PublishPlan:
    """The plan from given summaries (audit passes ones it read itself). Raises ListError."""
    root, list_path, results_dir = Path(root), Path(list_path), Path(results_dir)
    listing = parse_list(text, str(list_path))
    hashes = Hashes(root, known_hashes)
    groups: dict[tuple[str, str], list[Summary]] = {}
    for s in summaries:
        if s.ok and s.mode == "measured":
            groups.setdefault((s.claim_id, s.hardware), []).append(s)
    removed: list[Removal] = []
    why_not: dict[str, str] = {}
    winners: list[Summary] = []
    at = shown_path(results_dir, root)
    for (cid, hw), recs in sorted(groups.items()):
        recs.sort(key=lambda s: (s.created_utc, s.path), reverse=True)
        deciding = None
        for s in recs:
            why = not_current(s, hashes, allow_dirty)
            if not why:
                deciding = s
                break
            why_not[s.path] = "; ".join(why)
        verified = [s for s in recs if s.verdict == VERIFIED and s.published_value is not None]
        if deciding is not None and deciding.verdict == VERIFIED and deciding.published_value is not None:
            winners.append(deciding)
            for s in verified:
                if s is not deciding:
                    why_not.setdefault(s.path, f"superseded by the newer verified record {at}/{deciding.path}")
            continue
        if deciding is not None:
            for s in verified:
                why_not.setdefault(s.path, f"superseded by the newer {deciding.verdict} record "
                                           f"{at}/{deciding.path}: {deciding.reason}")
        if verified:
            removed.append(Removal(cid, hw, verified[0].path, why_not[verified[0].path]))
    numbers, problems = _attach(root, list_path, results_dir, listing, winners, removed, why_not, cache,
                                known_checks)
    return _finish(root, list_path, text, listing, numbers, removed, summaries, problems, why_not,
                   max_per_entry, results_dir)


def _attach(root, list_path, results_dir, listing: Listing, winners, removed, why_not, cache, known=None):
    """Tie each winning record to its entry through its claim, which must still pass check."""
    from .claimcheck import check_claims

    paths = sorted({s.claim_path for s in winners})
    sources = {s.claim_path: s.source_sha256 for s in winners}
    checked = dict(zip(paths, check_claims(paths, root, listing, sources=sources, known=known,
                                           cache_dir=results_dir / ".cache" if cache else None)))
    numbers, problems = [], []
    prefix = Path(os.path.relpath(results_dir.resolve(), list_path.resolve().parent)).as_posix()
    entries: dict[str, object] = {}  # claim file -> its entry; Listing.find scans every entry
    for s in winners:
        r = checked[s.claim_path]
        if not r.ok or r.claim is None or r.claim.id != s.claim_id:
            first = r.problems[0] if r.problems else f"claim id is not {s.claim_id}"
            why = f"claim {s.claim_path} no longer passes check: {first}"
            why_not[s.path] = why
            removed.append(Removal(s.claim_id, s.hardware, s.path, why))
            problems.extend(r.problems or (Problem(s.claim_path, 1, "id", why),))
            continue
        if s.claim_path not in entries:
            entries[s.claim_path] = listing.find(r.claim.entry)  # check passed, so it resolves
        entry = entries[s.claim_path]
        dirty = is_dirty(s)
        link = s.path if prefix == "." else f"{prefix}/{s.path}"
        text = " · ".join([
            format_value(s.metric, float(s.published_value), s.floor_term, safe_text(r.claim.baseline.name)),
            safe_text(s.hardware_name), dtype_short(s.dtype), f"[record]({link})"] + (["dirty"] if dirty else []))
        numbers.append(Number(s.claim_id, entry.key, entry.line, s.hardware, s.created_utc, s.path,
                              text, dirty))
    return numbers, problems


def _finish(root, list_path, text, listing, numbers, removed, summaries, problems, why_not, cap,
            results_dir) -> PublishPlan:
    by_line: dict[int, list[Number]] = {}
    for n in numbers:
        by_line.setdefault(n.entry_line, []).append(n)
    shown, hidden, expected, updates, cleared = [], [], {}, {}, []
    for entry in listing.entries:
        ns = sorted(by_line.get(entry.line, []), key=lambda n: (n.created_utc, n.claim_id, n.hardware),
                    reverse=True)
        shown += ns[:cap]
        hidden += ns[cap:]
        content = "; ".join(n.text for n in ns[:cap]) or None
        expected[entry.line] = (entry.key, content)
        old = read_region(entry)
        if old != ((entry.key, content) if content is not None else None):
            updates[entry.line] = (entry.key, content)
            if content is None:
                cleared.append((entry.key, old[1]))
    new_text = apply(text, updates, str(list_path)) if updates else text
    corrupt = tuple(s for s in summaries if not s.ok)
    return PublishPlan(list_path, text, new_text, tuple(shown), tuple(hidden), tuple(removed),
                       corrupt, tuple(problems), expected, why_not, tuple(cleared),
                       shown_path(results_dir, root))


def shown_path(path: Path, root: Path) -> str:
    """`path` relative to the project root when it is inside it, as messages show it."""
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


def publish(root: Path, list_path: Path, results_dir: Path, *, allow_dirty: bool = False,
            max_per_entry: int = 3, dry_run: bool = False) -> PublishPlan:
    """Plan, then replace the list atomically; refuse if it changed on disk meanwhile."""
    list_path = Path(list_path)
    before = list_path.read_bytes()
    st = os.stat(list_path)
    p = plan(root, list_path, results_dir, allow_dirty=allow_dirty, max_per_entry=max_per_entry,
             text=before.decode("utf-8"))
    if dry_run or not p.changed:
        return p
    _replace_if_unchanged(list_path, p.new_text.encode("utf-8"), before, st)
    return p


def _replace_if_unchanged(path: Path, data: bytes, before: bytes, st: os.stat_result) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
