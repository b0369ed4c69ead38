"""Provenance: which files a number depends on, and the chain claim -> source -> every record ->
what the list shows now, and why.

"Dirty" is decided here, once, for the runner, publish and audit alike: a record is from a dirty
tree when a file its number depends on (its claim, the kernel and task modules it imported, and
claimbench itself) differs from the commit it names, or when committed evidence (a tracked file
under `results/records/`) was changed. `LIST.md`, publish's temp files, the site and new,
untracked records never make a tree dirty: publishing must not stop the next run from publishing.

The reader's trail from a number back to its run is `report.trail`.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Iterable, Optional

from claimbench.errors import UsageError

DEPENDS_PREFIXES = ("src/claimbench/", "results/records/")  # claimbench itself; committed evidence
NEVER_DIRTY = re.compile(r"^(LIST\.md|(.*/)?\.LIST\.md\.[^/]*\.tmp)$")
MAX_DIRTY_FILES = 500  # more than this and the record keeps only the flag


def _git(root: Path, *args: str) -> Optional[str]:
    try:
        r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout if r.returncode == 0 else None


def tree_changes(root: Path) -> Optional[list[str]]:
    """Paths (relative to the project root, POSIX) that differ from HEAD and could change a
    number, sorted; None outside a git work tree. Untracked files count (a new kernel module is
    code the commit does not have), except under `results/`; tracked files under `results/`
    count only in `results/records/`."""
    prefix = _git(root, "rev-parse", "--show-prefix")
    status = _git(root, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames") if prefix is not None else None
    if prefix is None or status is None:
        return None
    prefix = prefix.strip()
    out = []
    for entry in status.split("\0"):
        if len(entry) < 4:
            continue
        xy, path = entry[:2], entry[3:]
        rel = path[len(prefix):] if path.startswith(prefix) else "../" * prefix.count("/") + path
        if never_dirty(rel, untracked=xy == "??"):
            continue
        out.append(rel)
    return sorted(out)


def never_dirty(rel: str, *, untracked: bool) -> bool:
    """The changes that cannot move a number: the list, publish's temp files, anything new under
    results/, and tracked results/ files outside the committed records."""
    if NEVER_DIRTY.match(rel):
        return True
    if rel.startswith("results/"):
        return untracked or not rel.startswith("results/records/")
    return False


def relevant_changes(files: Iterable[str], claim_path: str, sources: Iterable[str]) -> list[str]:
    """Of a tree's changed files, those one claim's number depends on."""
    deps = {claim_path, *sources}
    return [f for f in files if f in deps or f.startswith(DEPENDS_PREFIXES)]


def changed_tracked_records(root: Path, results_dir: Path, *, base: Optional[str] = None) -> Optional[dict[str, str]]:
    """Committed record files that differ now, relative to the results folder -> how, with since
    when ("modified since commit HEAD"); None when the folder is not in a git work tree.

    Without ``base`` they are compared with HEAD. CI checks a pull request at its own commit, where
    HEAD already holds the pull request's edits: a deleted or rewritten record is part of HEAD, so a
    refutation removed there brought an older number back with `audit` clean (an adversarial review,
    2026-12-06). With ``base`` (a ref: the branch the pull request goes into) they are compared with
    the merge base of ``base`` and HEAD, committed and uncommitted changes alike. A ref git does not
    know is a `UsageError`: an unchecked base would be a clean audit that checked nothing."""
    results_dir = Path(results_dir)
    folder = results_dir / "records"
    if not folder.is_dir():
        return None
    top = _git(folder, "rev-parse", "--show-toplevel")
    if top is None:
        return None
    if base is None:
        since = "commit HEAD"
        status = _git(folder, "status", "--porcelain=v1", "-z", "--untracked-files=no", "--no-renames", "--", ".")
        pairs = [(e[:2], e[3:]) for e in (status or "").split("\0") if len(e) >= 4]
    else:
        mb = _git(folder, "merge-base", "--", base, "HEAD") if not base.startswith("-") else None
        if mb is None:
            raise UsageError(f"--base {base}: not a commit this repository knows (fetch it first: git fetch origin "
                             f"{base.removeprefix('origin/')})")
        since = f"{base} (merge base {mb.strip()[:10]})"
        diff = _git(folder, "diff", "--name-status", "-z", "--no-renames", mb.strip(), "--", ".")
        if diff is None:
            return None
        parts = diff.split("\0")
        pairs = [(parts[k], parts[k + 1]) for k in range(0, len(parts) - 1, 2) if parts[k]]
    where = results_dir.resolve()
    words = {"M": "modified", "D": "deleted", "T": "changed type", "A": "added", "U": "unmerged"}
    out = {}
    for xy, path in pairs:
        full = (Path(top.strip()) / path).resolve()
        if full.is_relative_to(where) and "A" not in xy:
            how = next((words[c] for c in xy if c in words), "changed")
            out[full.relative_to(where).as_posix()] = f"{how} since {since}"
    return out


LOCAL_STATE = (".cache", "index.jsonl")  # under the results folder: caches and the index, never evidence


def carried_state(results_dir: Path) -> list[str]:
    """Caches and the index that git tracks under the results folder (paths relative to it).

    They are local state: answers this machine computed from the records. One that a clone
    carries was written by whoever committed it, so trusting it would let a forged cache line
    vouch for a forged record. Publish and audit ignore such files and fail, naming them."""
    results_dir = Path(results_dir)
    if not results_dir.is_dir():
        return []
    out = _git(results_dir, "ls-files", "-z", "--", *LOCAL_STATE)
    return sorted({p for p in (out or "").split("\0") if p})


def tracked_links(root: Path, results_dir: Path) -> list[str]:
    """Symbolic links git tracks at or under the results folder, as paths relative to ``root``.

    claimbench writes records, logs, caches, the index and the site under that folder, and never
    makes a link there; one that a clone carries was put there by whoever committed it, and every
    write through it lands where that person chose (an adversarial review: a committed
    `results/index.jsonl -> ~/.bashrc` got record text appended; a committed `results/site/` sent
    pages over files outside the project). A link made by hand in a clone (results/runs on a
    bigger disk) is the user's own, and is not tracked."""
    root, results_dir = Path(root), Path(results_dir)
    try:
        rel = results_dir.absolute().relative_to(root.absolute()).as_posix()
    except ValueError:  # a results folder outside the project is the user's own choice
        return []
    # the folders on the way too: with `data -> /outside` committed, `--results data/results` listed
    # nothing under it and wrote there (an adversarial review)
    above = [p.relative_to(root.absolute()).as_posix() for p in results_dir.absolute().parents
             if p != root.absolute() and p.is_relative_to(root.absolute()) and p.is_symlink()]
    out = _git(root, "ls-files", "-s", "-z", "--", rel, *above)
    links = []
    for entry in (out or "").split("\0"):
        meta, _, path = entry.partition("\t")
        if path and meta.startswith("120000 "):
            links.append(path)
    return sorted(links)


def refuse_tracked_links(root: Path, results_dir: Path, command: str) -> None:
    """Raise UsageError, before ``command`` writes anything, when git tracks a link under the results folder."""
    links = tracked_links(root, results_dir)
    if links:
        shown = ", ".join(links[:5]) + (f" and {len(links) - 5} more" if len(links) > 5 else "")
        raise UsageError(f"{shown}: a symbolic link that git tracks under the results folder; `{command}` never "
                         "writes through one (whoever committed it chose where the writes land): untrack it with "
                         f"`git rm --cached {links[0]}` and remove it")
