"""Which records stand: the one judgement `publish` and `audit` share.

A record stands when nothing about it is forged, misplaced or impossible: it can be read; its
verdict, value and interval recompute from its own samples (`recordcheck`); it sits in its
claim's folder under a name the runner writes; its claim file exists, and everything it copied
from that claim agrees with the file whose hash it carries; it is not dated in the future; and,
where it is committed, it is byte for byte what HEAD holds. A record that does not stand is
*refused*, with the field and the reason, and takes no part in anything else.

Of the records that stand, a record is *current* when its claim and source hashes still match the
files, its protocol is not below the minimum, and its tree was clean (see `provenance`). For one
claim on one machine, the latest current measured record decides ("latest" by its own date, ties
broken by file name): if it is verified, its number is shown; if not, the number comes off, so
rerunning until lucky does not pay.

The expensive part of standing (the bootstrap) is asked for lazily, through `verify`, and only
where it can change what is shown: for a verified record about to decide (a number rests on it),
and again for the next one when it fails. A record that is not verified decides without it: it
can only take a number off, never put one on, so a forgery among such records cannot show a
false number (audit, which recomputes every record, still names it). Audit answers `verify`
from what it already computed; publish computes it for the few records it needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from claimbench.store.atcommit import CommitFiles
from claimbench.store.record import MIN_PROTOCOL_VERSION, sha256_file
from claimbench.store.recordwrite import name_problem
from claimbench.store.summary import Summary

SKEW_S = 300  # a record may be dated up to 5 minutes after `now`: clocks of two machines differ
VERIFIED = "verified"

Group = tuple  # (claim id, machine): what a reader tells numbers apart by. Not the hardware slug, a label the
# record states: an old verified record given a slug of its own stood apart from the newer refutation on the
# same GPU and brought its number back (an adversarial review, 2026-12-06).
Problems = list  # [(key, message)]


class Hashes:
    """sha256 of project files, each read once per run; None for a missing file or one outside root."""

    def __init__(self, root: Path, known: Optional[dict] = None):
        self.root = Path(root).resolve()
        self._memo: dict[str, Optional[str]] = dict(known or {})  # `known`: another Hashes' memo

    @property
    def memo(self) -> dict:
        return dict(self._memo)

    def get(self, rel: str) -> Optional[str]:
        try:
            return self._memo[rel]
        except KeyError:
            try:  # a path from a record: a NUL byte or an over-long name is a file that is not there
                p = (self.root / rel).resolve()
                h = sha256_file(p) if p.is_relative_to(self.root) and p.is_file() else None
            except (ValueError, OSError):
                h = None
            self._memo[rel] = h
            return h


@dataclass(frozen=True)
class ClaimFacts:
    """What the judgement needs of one claim file: what its records must copy."""

    path: str
    digest: Callable  # (a record's copy digest, its sweep point or None) -> the claim's digest in that form, or None
    differences: Callable  # (record path) -> [(field, record's value, claim's value)]
    files: frozenset = frozenset()  # the project files the claim names (inputs, kernel, baseline, reference, prepare)


def unnamed_sources(s: Summary, f: Optional[ClaimFacts]) -> Problems:
    """`lacks_named` of a summary against the claim file it names (audit and publish)."""
    why = None if f is None else lacks_named(f.files, s.source_sha256, s.protocol_version, named_by=f.path)
    return [] if why is None else [("source_sha256", why)]


def lacks_named(files: frozenset, sources: Mapping[str, str], protocol_version: int, *, named_by: str) -> Optional[str]:
    """Why a record's sources, lacking a file its claim names, do not stand; None when none is missing.
    The runner hashes every project file the sides load, the claim's own files first, so one missing
    was removed by hand, and the number would never go stale when that file changed (an adversarial
    review, 2026-12-06). Audit, publish and ingest all ask this."""
    if protocol_version < MIN_PROTOCOL_VERSION or files <= sources.keys():
        return None  # an older protocol's record decides no number, and older runners hashed less
    missing = sorted(files - sources.keys())
    return (f"lacks {', '.join(missing[:3])}{' and more' if len(missing) > 3 else ''}, which {named_by} names: a "
            "run records every file its claim names, so this record would never go stale when that file changed; "
            "edited by hand?")


@dataclass
class Judgement:
    refused: dict = field(default_factory=dict)  # record path -> [(key, message)]
    why_not: dict = field(default_factory=dict)  # record path -> why it backs no number
    deciding: dict = field(default_factory=dict)  # group -> the latest standing current record
    verified: dict = field(default_factory=dict)  # group -> its standing verified records, newest first
    tampered: dict = field(default_factory=dict)  # claim id -> why its committed evidence is not intact

    def winners(self) -> list[Summary]:
        return [s for g, s in sorted(self.deciding.items()) if shows_number(s)]


def is_dirty(s: Summary) -> bool:
    """Only a known-clean commit counts as clean; an unknown tree is treated as dirty."""
    return s.git_dirty is not False or not s.git_commit


def not_current(s: Summary, hashes: Hashes, allow_dirty: bool) -> list[str]:
    """Why a standing record may not decide what the list shows; empty when it is current."""
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
        why.append(dirty_reason(s))
    return why


def changed_files(files: Sequence[str], commit: str) -> str:
    """"a, b and 3 more differed from commit 0123456789": the files that make a record dirty, as
    publish, audit and ingest name them."""
    listed = ", ".join(files[:5]) + (f" and {len(files) - 5} more" if len(files) > 5 else "")
    return f"{listed} differed from commit {commit[:10]}"


def dirty_reason(s: Summary) -> str:
    if not s.git_commit:
        return "from an unknown git tree (no commit recorded); run from a git checkout, or pass --allow-dirty"
    if s.dirty_files:
        return f"from a dirty tree: {changed_files(s.dirty_files, s.git_commit)}; commit, rerun, or pass --allow-dirty"
    return (f"from a dirty tree at commit {s.git_commit[:10]} (the runner did not record which files); "
            "rerun from a clean commit, or pass --allow-dirty")


def utc_bound(now: Optional[str] = None, skew_s: int = SKEW_S) -> str:
    """The latest normalized time a record may carry at `now` (a normalized time; default: now)."""
    t = datetime.strptime(now, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc) if now else datetime.now(timezone.utc)
    return (t + timedelta(seconds=skew_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def future_problem(created_utc: str, when: str, bound: str) -> Optional[tuple[str, str]]:
    """("created_utc", why) when a record's normalized time ``when`` is after ``bound``
    (`utc_bound`), else None. Audit, publish and ingest all ask this, each against the clock at the
    time it runs: never cached with a record's bytes, so one judgement holds at any moment."""
    if when <= bound:  # normalized times compare as strings in time order
        return None
    return ("created_utc", f"dated {created_utc}, after the time of this check by more than the "
                           f"{SKEW_S // 60} minutes allowed for clock skew: a record cannot come from the future")


def record_problems(s: Summary, *, claims_by_id: Mapping[str, str], facts: Callable[[str], Optional[ClaimFacts]],
                    hashes: Hashes, bound: str, tracked: Mapping[str, str]) -> Problems:
    """Everything wrong with a record that needs no bootstrap: where it is, what it is called,
    when it says it ran, whether its claim exists and agrees, whether committed bytes changed."""
    if s.error is not None:
        return [("record", s.error)]
    out: Problems = []
    path, when = s.path, s.when
    cut = path.rfind("/")
    folder, name = path[path.rfind("/", 0, cut) + 1:cut], path[cut + 1:]
    if tracked and path in tracked:
        out.append(("record", f"{tracked[path]}; committed evidence is immutable: restore it "
                              "with `git checkout -- <this file>` and add a new record instead"))
    if s.claim_id != folder:
        out.append(("claim_id", f"{s.claim_id!r} does not match its folder {folder!r}"))
    if (bad := name_problem(name, when)) is not None:  # the name matched RECORD_NAME when found
        out.append(bad)
    if (late := future_problem(s.created_utc, when, bound)) is not None:
        out.append(late)
    own = claims_by_id.get(s.claim_id)
    if own is None:
        out.append(("claim_id", f"no claim file for {s.claim_id!r} under claims/; remove the records of a "
                                "claim that no longer exists, or restore its claim"))
    elif s.claim_path != own:
        out.append(("claim_path", f"{s.claim_path!r} is not the claim file of {s.claim_id!r} ({own})"))
    elif hashes.get(s.claim_path) == s.claim_sha256:
        f = facts(s.claim_path)
        out += _disagreements(s, f) + unnamed_sources(s, f)
    return out


def _disagreements(s: Summary, f: Optional[ClaimFacts]) -> Problems:
    """The record against the claim file whose hash it carries (the current one: hashes match)."""
    if f is None:
        return []  # the claim does not parse: it fails check, and no number attaches to it
    if s.copy_sha and s.copy_sha == f.digest(s.copy_sha, s.point):
        return []
    diffs = f.differences(s.path)  # the slow, certain way: the record against the claim, field by field
    return [(key, f"the record says {have!r}, but {f.path} (the claim file whose hash it carries) says {want!r}; "
                  "a record copies its claim exactly: edited by hand?") for key, have, want in diffs[:5]]


def judge(summaries: Sequence[Summary], *, hashes: Hashes, claims_by_id: Mapping[str, str],
          facts: Callable[[str], Optional[ClaimFacts]], verify: Callable[[list], dict], now: Optional[str] = None,
          allow_dirty: bool = False, tracked: Optional[Mapping[str, str]] = None,
          shown_on: Optional[Callable[[Summary], Optional[int]]] = None, cap: int = 3,
          commits: Optional[CommitFiles] = None) -> Judgement:
    """Which records stand, and which one decides each (claim, machine).

    ``verify(summaries) -> {path: (summary as read now, problems)}`` is the bootstrap check. It is
    asked only for verified records whose number would be shown: ``shown_on(record)`` gives the
    list entry (line) a record's number goes on, or None, and each entry shows its ``cap`` most
    recent numbers. ``tracked`` maps committed records that differ from HEAD to how (modified,
    deleted); ``now`` is a normalized UTC time. ``commits``: the repository every record's commit
    and files are checked in (`store/atcommit`), for every record alike."""
    j = Judgement()
    tracked = dict(tracked or {})
    bound = utc_bound(now)
    on_disk = {s.path for s in summaries}
    for path, how in tracked.items():
        if path not in on_disk and path.count("/") >= 2:
            j.tampered.setdefault(path.split("/")[-2], f"{path} was {how}")

    def cheap(s: Summary) -> Problems:
        out = record_problems(s, claims_by_id=claims_by_id, facts=facts, hashes=hashes, bound=bound, tracked=tracked)
        return out or at_commit(s)

    asked: dict = {}  # what a record names of its commit -> the answer: records of one run share it

    def named(s: Summary) -> tuple:
        return s.git_commit, s.claim_path, s.claim_sha256, tuple(s.source_sha256.items()), s.git_dirty is False

    def at_commit(s: Summary) -> Problems:
        if commits is None or s.error is not None:
            return []
        key = named(s)
        if key not in asked:
            p = commits.problem(key[0], (key[1], key[2]), dict(key[3]), files=key[4])
            asked[key] = [p] if p is not None else []
        return list(asked[key])

    if commits is not None:  # every record's commit and files in one read
        unique = {named(s) for s in summaries if s.error is None and s.git_commit}
        commits.load(spec for c, claim, _, sources, files in unique
                     for spec in commits.specs(c, [claim, *(rel for rel, _ in sources)], files=files))

    expected: dict = {}  # (claim file, digest form) -> the digest its records must carry

    def fine(s: Summary) -> bool:
        """The common case, quickly: `record_problems` would find nothing (else it says what)."""
        path, when = s.path, s.when
        cut = path.rfind("/")
        if s.error is not None or s.claim_id != path[path.rfind("/", 0, cut) + 1:cut] or when > bound \
                or path[cut + 1:cut + 17] != when[:19].replace("-", "").replace(":", "") + "Z" \
                or (tracked and path in tracked) or claims_by_id.get(s.claim_id) != s.claim_path:
            return False
        if hashes.get(s.claim_path) != s.claim_sha256:
            return True
        key = (s.claim_path, s.copy_sha[:2], s.point, type(s.sweep_value))  # 4096 and 4096.0 are two points
        if key not in expected:
            f = facts(s.claim_path)
            expected[key] = (f.digest(s.copy_sha, s.point) if f is not None else s.copy_sha,
                             f.files if f is not None else frozenset())
        digest, files = expected[key]
        return s.copy_sha == digest and (s.protocol_version < MIN_PROTOCOL_VERSION or files <= s.source_sha256.keys())

    groups: dict[Group, list[Summary]] = {}
    for s in summaries:
        probs = at_commit(s) if fine(s) else cheap(s)
        if probs:
            j.refused[s.path] = probs
        elif s.mode == "measured" and s.point is None:  # a sweep point's number is never the claim's
            groups.setdefault((s.claim_id, s.machine), []).append(s)
    for recs in groups.values():
        recs.sort(key=_newest, reverse=True)

    def walk(g: Group) -> None:
        """The group's first current record decides (records before it get their why_not)."""
        j.deciding.pop(g, None)
        for s in groups[g]:
            why = [f"committed evidence of {s.claim_id} changed: {j.tampered[s.claim_id]}; restore it"] \
                if s.claim_id in j.tampered else not_current(s, hashes, allow_dirty)
            if not why:
                j.deciding[g] = s
                return
            j.why_not[s.path] = "; ".join(why)

    for g in groups:
        walk(g)
    checked: set = set()
    while True:
        ask = [(g, s) for g, s in _to_show(j.deciding, shown_on, cap) if s.path not in checked]
        if not ask:
            break
        answers = verify([s for _, s in ask])
        for g, s in ask:
            fresh, probs = answers.get(s.path, (s, []))
            recs = groups[g]
            if not probs and fresh == s:
                checked.add(s.path)
                continue
            recs.remove(s)
            if probs:
                j.refused[s.path] = list(probs)
            else:  # changed on disk since it was indexed: judge what is there now
                probs = cheap(fresh)
                if probs:
                    j.refused[fresh.path] = probs
                elif fresh.mode == "measured":
                    recs.append(fresh)
                    recs.sort(key=_newest, reverse=True)
            walk(g)
    for g, recs in groups.items():
        j.verified[g] = [s for s in recs if s.verdict == VERIFIED and s.published_value is not None]
    return j


def _newest(s: Summary) -> tuple:
    return s.when, s.path


def shows_number(s: Summary) -> bool:
    return s.verdict == VERIFIED and s.published_value is not None


def _to_show(deciding: dict, shown_on, cap: int) -> list:
    """(group, record) of every deciding verified record whose number a list entry would show."""
    by_entry: dict = {}
    for g, s in deciding.items():
        if shows_number(s):
            entry = shown_on(s) if shown_on is not None else g
            if entry is not None:
                by_entry.setdefault(entry, []).append((show_order(s), g, s))
    out = []
    for rows in by_entry.values():
        rows.sort(key=lambda r: r[0], reverse=True)
        out += [(g, s) for _, g, s in rows[:cap]]
    return out


def show_order(s: Summary) -> tuple:
    """How an entry orders its numbers: most recent first, then by claim and machine."""
    return s.when, s.claim_id, s.hardware, s.machine


def superseded(j: Judgement, at: str) -> list[tuple[Group, Summary, str]]:
    """For each group whose number does not stand: (group, its newest verified record, why);
    and why every other standing verified record backs no number, into `j.why_not`."""
    out = []
    for g in sorted(j.verified):
        verified, deciding = j.verified[g], j.deciding.get(g)
        for s in verified:
            if s is deciding:
                continue
            if deciding is None:
                continue
            if deciding.verdict == VERIFIED and deciding.published_value is not None:
                j.why_not.setdefault(s.path, f"superseded by the newer verified record {at}/{deciding.path}")
            else:
                j.why_not.setdefault(s.path, f"superseded by the newer {deciding.verdict} record "
                                             f"{at}/{deciding.path}: {deciding.reason}")
        if verified and (deciding is None or deciding.verdict != VERIFIED or deciding.published_value is None):
            out.append((g, verified[0], j.why_not[verified[0].path]))
    return out


def claim_ids(root: Path) -> dict[str, str]:
    """Claim id -> claim file (relative to root) for every claim file under claims/: the file
    name is the id (check enforces it)."""
    from claimbench.gate.claimfiles import discover

    out: dict[str, str] = {}
    root = Path(root)
    for p in discover([], root):  # paths under root/claims, as root was given ("." and "a/./b" included)
        try:
            out.setdefault(p.stem, p.relative_to(root).as_posix())
        except ValueError:
            continue
    return out
