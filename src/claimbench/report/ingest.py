"""Ingest: bring records made elsewhere (a fleet runner's artifact, `results/runs`) into the
committed store `results/records`, after checking that each says what it holds.

A record names the commit it ran from and the sha256 of its claim file and of every project file
the run imported or read. Ingest reads those files at that commit (`store/atcommit`, the check
publish and audit make too) and refuses a record whose hashes do not match them: a number is only
worth committing when the code that produced it can be checked out. The verdict, value and CI are
recomputed from the record's own samples by audit's record check, the one `audit` uses, so a
record ingest accepts is one audit accepts. Records from a dirty tree, an unknown commit or an
outdated protocol are refused too, and so is one dated later than audit's own bound at this moment
(`standing.utc_bound`). The good ones are copied byte for byte under their own names, never through
a link in the store (`store/recordplace`).
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Optional, Union

from claimbench.errors import UsageError
from claimbench.report.standing import changed_files, future_problem, lacks_named, utc_bound
from claimbench.spec.problem import Problem
from claimbench.store.atcommit import COMMIT, CommitFiles, git_objects
from claimbench.store.record import (
    MIN_PROTOCOL_VERSION,
    Record,
    RecordError,
    normalized_utc,
    parse_record,
    read_record_bytes,
    record_data,
)
from claimbench.store.recordwrite import name_problem
from claimbench.store.summary import judged_dirty

if TYPE_CHECKING:  # the claim model is imported only when a claim is read
    from claimbench.spec.claim import Claim

_REL = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_./-]*$")


@dataclass
class IngestReport:
    ingested: list[tuple[str, str]] = field(default_factory=list)  # (source, destination)
    present: list[tuple[str, str]] = field(default_factory=list)   # already there, byte for byte
    refused: list[Problem] = field(default_factory=list)           # one per refused file
    left: list[str] = field(default_factory=list)                  # good `skipped` records left where they are

    @property
    def ok(self) -> bool:
        return not self.refused


@dataclass
class _Candidate:
    source: Path
    raw: bytes
    rec: Record


def find_records(paths: Iterable[Path]) -> list[Path]:
    """Record files under each path (a file, a results folder, an unpacked artifact), sorted;
    hidden files and folders (`.cache`, `.tmp-*`) are skipped."""
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_file():
            out.append(p)
        elif p.is_dir():
            for dirpath, dirs, files in os.walk(p):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                out += [Path(dirpath) / f for f in sorted(files) if f.endswith(".json") and not f.startswith(".")]
        else:
            raise UsageError(f"{p}: no such file or folder")
    return list(dict.fromkeys(out))


def ingest(root: Path, sources: Iterable[Path], results: Path, *, dry_run: bool = False,
           skipped: bool = False, now: Optional[str] = None) -> IngestReport:
    """Check every record under ``sources`` and copy the good ones into ``results/records``.

    A `skipped` record (a GPU claim checked on a CPU: correctness only, no number) is checked like
    any other and, unless ``skipped``, left where it is: the main job writes one per GPU claim, and
    taking them all into the store buried the few records that carry a number (issue 26).
    ``now`` (a normalized UTC time; default: the clock) is the time records may not be dated after,
    give or take audit's clock skew: the bound audit and publish hold them to (`standing.utc_bound`)."""
    root, results = Path(root), Path(results)
    bound = utc_bound(now)
    _require_git(root)
    report = IngestReport()
    candidates: list[_Candidate] = []
    for path in find_records(sources):
        cand = _read(path)
        if isinstance(cand, Problem):
            report.refused.append(cand)
        elif (problem := _static(cand, bound)) is not None:
            report.refused.append(problem)
        else:
            candidates.append(cand)
    commits = CommitFiles(root)
    commits.load(spec for c in candidates for spec in commits.specs(c.rec.git_commit or "",
                                                                     [c.rec.claim_path, *c.rec.source_sha256]))
    hashed = []
    for cand in candidates:
        problem = _against_commit(cand, commits)
        if problem is not None:
            report.refused.append(problem)
        else:
            hashed.append(cand)
    copies = _ClaimsAtCommits(commits, hashed)
    judged = [(c, copies.problem(c)) for c in hashed]
    report.refused += [p for _, p in judged if p is not None]
    hashed = [c for c, p in judged if p is None]
    for cand, problems in zip(hashed, _recompute([c.rec for c in hashed])):
        if problems:
            key, msg = problems[0]
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            report.refused.append(_refuse(cand.source, key, f"{msg}{more}"))
        elif cand.rec.verdict == "skipped" and not skipped:
            report.left.append(str(cand.source))
        else:
            _place(cand, results, report, dry_run=dry_run)
    report.refused.sort(key=lambda p: p.path)
    return report


def _recompute(recs: list[Record]) -> list[list[tuple[str, str]]]:
    """Audit's own record check (invariants, and the verdict, value and CI recomputed from the
    samples): the one place ingest calls it."""
    from claimbench.report.audit import check_records

    return check_records(recs) if recs else []


def _refuse(path: Path, key: str, message: str) -> Problem:
    return Problem(str(path), 1, key, _one_line(message))


def _one_line(text: str) -> str:
    """Record text reaches a terminal: printable characters only, one line."""
    return " ".join("".join(ch if ch.isprintable() else " " for ch in str(text)).split())


def _read(path: Path) -> Union[_Candidate, Problem]:
    try:
        raw, _ = read_record_bytes(path)
        rec = parse_record(record_data(raw, str(path)), str(path))
    except OSError as e:
        return _refuse(path, "file", f"cannot read: {e.strerror or e}")
    except (TypeError, ValueError) as e:  # an old shape a migration cannot read
        return _refuse(path, "record", f"malformed record: {e}")
    except RecordError as e:
        return _refuse(path, "record", str(e).removeprefix(f"{path}: "))
    return _Candidate(path, raw, rec)


def _static(c: _Candidate, bound: str) -> Optional[Problem]:
    """What can be refused without git: the name, the date, the commit, the tree, the protocol, the paths."""
    rec, path = c.rec, c.source
    when = normalized_utc(rec.created_utc) or ""
    if (bad := name_problem(path.name, when)) is not None:
        return _refuse(path, *bad)  # audit's own rule: what ingest takes under this name, audit accepts
    if (bad := future_problem(rec.created_utc, when, bound)) is not None:
        return _refuse(path, *bad)  # audit's own bound, at this moment: recordcheck's cached check allows a day
    if not re.match(r"^[a-z0-9][a-z0-9._-]{0,99}$", rec.claim_id):
        return _refuse(path, "claim_id", f"{rec.claim_id!r} is not a claim id")
    dirty, files = judged_dirty(rec)  # publish's and audit's rule: files the claim does not depend on do not count
    if dirty is not False:
        named = f": {changed_files(files, str(rec.git_commit))}" if files else ""
        return _refuse(path, "git_dirty", f"made from a dirty or unknown tree{named}: its files are in no commit; "
                       "commit them and rerun from a clean checkout")
    if not rec.git_commit or not COMMIT.match(rec.git_commit):
        return _refuse(path, "git_commit", f"{rec.git_commit!r} is not a commit hash; rerun from a clean checkout")
    if rec.protocol_version < MIN_PROTOCOL_VERSION:
        return _refuse(path, "protocol_version", f"protocol {rec.protocol_version} is older than the minimum "
                       f"{MIN_PROTOCOL_VERSION} that publish uses; rerun the claim")
    for rel in [rec.claim_path, *rec.source_sha256]:
        if not _REL.match(rel) or ".." in rel.split("/"):
            return _refuse(path, "source_sha256", f"{rel!r} is not a path inside the project")
    if Path(rec.claim_path).stem != rec.claim_id:
        return _refuse(path, "claim_path", f"{rec.claim_path!r} is not the file of claim {rec.claim_id!r}")
    return None


def _against_commit(c: _Candidate, commits: CommitFiles) -> Optional[Problem]:
    rec = c.rec
    bad = commits.problem(rec.git_commit, (rec.claim_path, rec.claim_sha256), rec.source_sha256)
    return _refuse(c.source, *bad) if bad is not None else None


class _ClaimsAtCommits:
    """Each record's copy of its claim against the claim file at the record's commit: audit holds
    a current record to the claim file, and ingest must refuse what audit would (a claimed value or
    tolerance edited, the verdict recomputed: found by tests/report/test_one_judgement.py)."""

    def __init__(self, commits: CommitFiles, cands: list[_Candidate]) -> None:
        self.commits = commits
        specs = list(dict.fromkeys(self._spec(c) for c in cands))
        self.blobs = dict(zip(specs, git_objects(commits.root, specs)))
        self.memo: dict[str, Union["Claim", str]] = {}  # spec -> the Claim at that commit, or why there is none

    def _spec(self, c: _Candidate) -> str:
        return self.commits.path_spec(c.rec.git_commit or "", c.rec.claim_path)

    def _claim(self, spec: str) -> Union["Claim", str]:
        """The claim at that commit, or the reason it cannot vouch for a record."""
        if spec not in self.memo:
            from claimbench.spec.claim import Claim
            from claimbench.spec.yamlsafe import parse_document
            from claimbench.store.claimcopy import expected_copy

            raw = self.blobs.get(spec)
            try:
                claim = Claim.model_validate(parse_document(raw or b"", spec).data)
            except Exception as e:  # noqa: BLE001 (any parse or validation failure: the claim cannot vouch)
                self.memo[spec] = f"does not parse as a claim ({type(e).__name__})"
            else:
                self.memo[spec] = claim if expected_copy(claim) is not None else "has flops or bytes that do not evaluate"
        return self.memo[spec]

    def problem(self, c: _Candidate) -> Optional[Problem]:
        from claimbench.gate.srcgraph import named_files
        from claimbench.store.claimcopy import record_differences

        claim = self._claim(self._spec(c))
        commit = (c.rec.git_commit or "")[:12]
        if isinstance(claim, str):
            return _refuse(c.source, "claim_path", f"{c.rec.claim_path} at commit {commit} {claim}")
        diffs = record_differences(c.rec, claim)
        if not diffs:
            why = lacks_named(named_files(claim, self.commits.root), c.rec.source_sha256, c.rec.protocol_version,
                              named_by=f"{c.rec.claim_path} at commit {commit}")
            return None if why is None else _refuse(c.source, "source_sha256", why)
        key, have, claim_says = diffs[0]
        return _refuse(c.source, key, f"the record says {have!r}, but {c.rec.claim_path} at commit {commit} says "
                       f"{claim_says!r}; a record copies its claim exactly: edited by hand?")


def _require_git(root: Path) -> None:
    try:
        ok = subprocess.run(["git", "-C", str(root), "rev-parse", "--git-dir"], capture_output=True,
                            timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        raise UsageError(f"{root}: not a git repository; ingest checks each record against the commit it names")


def _place(c: _Candidate, results: Path, report: IngestReport, *, dry_run: bool) -> None:
    """Copy the record under its own name, or find it there already; a destination that is a link,
    not a record, or another record of that name is refused (`store/recordplace`), never followed."""
    from claimbench.store.recordplace import PlaceRefused, existing_bytes, place

    dest = results / "records" / c.rec.claim_id / c.source.name
    pair = (str(c.source), str(dest))
    try:
        there = existing_bytes(results, c.rec.claim_id, c.source.name) if dry_run else \
            place(results, c.rec.claim_id, c.source.name, raw=c.raw)
    except PlaceRefused as e:
        report.refused.append(_refuse(c.source, "file", f"cannot place it: {e}"))
        return
    if there is None:
        report.ingested.append(pair)
    elif there == c.raw:
        report.present.append(pair)
    else:
        report.refused.append(_refuse(c.source, "file", f"{dest} already holds a different record of that "
                                      "name; rename one of them"))
    if there is None and not dry_run:
        from claimbench.store.index import append_index

        append_index(results, dest, c.rec)
