"""From a number back to its run: a rerun that compares (the steps themselves are `store.recipe`).

`rerun` is what
`claimbench reproduce` does with them: it checks the commit out into a temporary git worktree
(the user's own checkout is never touched), runs the claim there through the runner's public
`run_claims`, and compares the new verdict and interval with the old.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from claimbench.errors import UserError
from claimbench.store.recipe import HOT_MODE, recipe
from claimbench.store.record import Record, sha256_file


@dataclass(frozen=True)
class Comparison:
    """The old record against the new run: the same verdict and, on the same kind of machine,
    intervals that overlap. On another machine (a Xeon's record rerun on an EPYC) the number is
    expected to differ, so the verdict alone is compared and the intervals are only shown; a
    machine that is not known on either side counts as the same, the stricter reading."""

    old_verdict: str
    new_verdict: str
    old_value: Optional[float]
    new_value: Optional[float]
    old_ci: tuple[Optional[float], Optional[float]]
    new_ci: tuple[Optional[float], Optional[float]]
    new_reason: str
    new_record: Optional[Path]
    old_machine: str = ""
    new_machine: str = ""

    @property
    def same_machine(self) -> bool:
        return not (self.old_machine and self.new_machine) or self.old_machine == self.new_machine

    @property
    def overlap(self) -> Optional[bool]:
        (a, b), (c, d) = self.old_ci, self.new_ci
        if a is None or b is None or c is None or d is None:
            return None
        return a <= d and c <= b

    @property
    def reproduced(self) -> bool:
        if self.old_verdict != self.new_verdict:
            return False
        if self.old_value is None and self.new_value is None:
            return True
        return self.overlap is True or not self.same_machine

    def lines(self, metric: str) -> list[str]:
        def val(v, ci):
            if v is None:
                return "-"
            return f"{metric} {v:.4g}" + (f" [95% CI {ci[0]:.4g}, {ci[1]:.4g}]" if None not in ci else "")

        out = [f"  before  {self.old_verdict:<12} {val(self.old_value, self.old_ci)}",
               f"  now     {self.new_verdict:<12} {val(self.new_value, self.new_ci)}  ({self.new_reason})"]
        if self.new_record:
            out.append(f"  new record {self.new_record}")
        if not self.same_machine:
            out.append(f"  another machine: the record ran on {self.old_machine}, this run on {self.new_machine}; "
                       "a number moves with the machine, so only the verdicts are compared"
                       + ("" if self.overlap is None else
                          f" (the intervals {'overlap' if self.overlap else 'do not overlap'})"))
        if self.reproduced:
            out.append("reproduced: the same verdict" + (", and the intervals overlap" if self.overlap else ""))
        elif self.old_verdict != self.new_verdict:
            out.append(f"not reproduced: the verdict was {self.old_verdict}, it is {self.new_verdict} now")
        else:
            out.append("not reproduced: the same verdict, but the two 95% intervals do not overlap")
        return out


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=check)


def _toplevel(root: Path) -> Path:
    try:
        top = _git(root, "rev-parse", "--show-toplevel", check=False)
    except FileNotFoundError:
        raise UserError("git is not installed; reproduce checks the record's commit out with git") from None
    if top.returncode != 0:
        raise UserError(f"{root}: not a git checkout; reproduce needs the project's git history")
    return Path(top.stdout.strip())


def changed_files(rec: Record, tree: Path) -> list[str]:
    """Files whose content at the checked-out commit differs from what the run hashed."""
    out = []
    for rel, want in [(rec.claim_path, rec.claim_sha256), *sorted(rec.source_sha256.items())]:
        p = tree / rel
        if not p.is_file() or sha256_file(p) != want:
            out.append(rel)
    return out


def rerun(rec: Record, root: Path, results: Path, *, timeout_s: Optional[float] = None,
          progress: Optional[Callable[[str], None]] = None) -> Comparison:
    """Check out `rec`'s commit beside the user's tree, run its claim there, compare."""
    if not rec.git_commit:
        raise UserError(f"record of {rec.claim_id} names no git commit: its code cannot be recovered")
    top = _toplevel(root)
    if _git(top, "cat-file", "-e", f"{rec.git_commit}^{{commit}}", check=False).returncode != 0:
        raise UserError(f"commit {rec.git_commit} is not in this repository; fetch it first "
                        f"(git fetch origin {rec.git_commit})")
    sub = root.resolve().relative_to(top.resolve())  # the project may sit inside a bigger repository
    scratch = Path(tempfile.mkdtemp(prefix="claimbench-reproduce-"))
    tree = scratch / "tree"
    try:
        _git(top, "worktree", "add", "--detach", "--quiet", str(tree), rec.git_commit)
        project = tree / sub
        changed = changed_files(rec, project)
        if changed:
            raise UserError(f"{', '.join(changed[:5])}: differ at commit {rec.git_commit[:12]} from the files "
                            "the run hashed, so the code that made this record is not in that commit"
                            + (" (the run came from a dirty tree)" if rec.git_dirty else ""))
        from claimbench.options import RunOptions
        from claimbench.runner import run_claims

        steps = recipe(rec, "")
        repeat = int(steps.run_args[steps.run_args.index("--repeat") + 1]) if "--repeat" in steps.run_args else 1
        threads = int(steps.run_args[steps.run_args.index("--threads") + 1]) if "--threads" in steps.run_args else None
        opts = RunOptions(results=results, timeout_s=timeout_s, repeat=repeat, hot=rec.mode == HOT_MODE,
                          progress=progress, threads=threads, sweep=rec.sweep_point is not None)
        _, outcomes = run_claims([project / rec.claim_path], project, opts)
    finally:
        _git(top, "worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        _git(top, "worktree", "prune", check=False)
    o = outcomes[0]
    if rec.sweep_point is not None:  # a sweep point's record is held to the same point of the new run
        point = next((p for p in o.points if p.point == rec.sweep_point.label), None)
        if point is None:
            raise UserError(f"the sweep point {rec.sweep_point.label} was not measured: the claim's own point "
                            f"ended {o.status.value} ({o.reason}), and a sweep runs only after its own point passes")
        o = point
    return Comparison(rec.verdict, o.status.value, rec.value, o.value, (rec.ci_low, rec.ci_high),
                      (o.ci_low, o.ci_high), o.reason, o.record_path,
                      old_machine=str(rec.hardware.get("name") or ""), new_machine=o.hardware)
