"""`--changed-since REF`: the claims whose claim file, or a project file their code imports, changed.

"Changed" is measured from the merge base of REF and HEAD (what a pull request changed, not what
landed on the target branch since it branched), up to the working tree, plus untracked files, so
an uncommitted edit counts too. Renames count as both paths. A claim file that cannot be parsed is
kept: its dependencies are unknown, and running it is what shows the problem (fail closed).
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable

from claimbench.errors import UsageError


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise UsageError("--changed-since needs git, which is not installed") from None


def changed_files(root: Path, ref: str) -> set[Path]:
    """Absolute paths of files that differ between the merge base of REF and HEAD, and the work tree."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise UsageError(f"--changed-since {ref}: {root} is not inside a git repository")
    toplevel = Path(top.stdout.strip()).resolve()
    if ref.startswith("-") or _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").returncode != 0:
        raise UsageError(f"--changed-since {ref}: not a commit in this repository "
                         "(in CI, fetch it first, e.g. actions/checkout with fetch-depth: 0)")
    base = _git(root, "merge-base", ref, "HEAD")
    since = base.stdout.strip() if base.returncode == 0 and base.stdout.strip() else ref
    diff = _git(root, "diff", "--name-only", "--no-renames", "-z", since, "--")
    if diff.returncode != 0:
        raise UsageError(f"--changed-since {ref}: git diff failed: {diff.stderr.strip().splitlines()[-1:]}")
    untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z", "--full-name")
    names = [n for n in diff.stdout.split("\0") if n]
    names += [n for n in untracked.stdout.split("\0") if n] if untracked.returncode == 0 else []
    return {(toplevel / n).resolve() for n in names}


def claim_dependencies(root: Path, claim_path: Path) -> set[Path] | None:
    """The claim file and every project file its run depends on; None when it does not parse."""
    from claimbench.gate.srcgraph import claim_sources
    from claimbench.spec.claim import Claim
    from claimbench.spec.yamlsafe import load_document

    try:
        claim = Claim.model_validate(load_document(claim_path).data)
    except Exception:  # unreadable for any reason: keep the claim, never silently drop it
        return None
    return {Path(claim_path).resolve(), *(p.resolve() for p in claim_sources(root, claim))}


def changed_claims(root: Path, claim_paths: Iterable[Path], ref: str) -> list[Path]:
    """The subset of ``claim_paths`` (in their order) touched since ``ref``."""
    root = Path(root).resolve()
    changed = changed_files(root, ref)
    out = []
    for p in claim_paths:
        deps = claim_dependencies(root, Path(p))
        if deps is None or deps & changed:
            out.append(Path(p))
    return out
