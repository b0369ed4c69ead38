"""From a number back to its run: the steps that re-derive a record, and a rerun that compares.

`recipe(record)` is data only (no torch, no git), so `show`, the record writer and the site can
all print the same steps: check out the record's commit, install, run the one claim with the
flags that shaped the measurement, on the hardware it names. `rerun` is what
`claimbench reproduce` does with them: it checks the commit out into a temporary git worktree
(the user's own checkout is never touched), runs the claim there through the runner's public
`run_claims`, and compares the new verdict and interval with the old.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from claimbench.errors import UserError
from claimbench.store.record import Record, sha256_file

HOT_MODE = "measured-hot"


@dataclass(frozen=True)
class Recipe:
    """How to re-derive one record's number."""

    commit: Optional[str]
    claim_path: str
    run_args: tuple[str, ...]  # after `claimbench run`
    needs: str  # the hardware, in words
    record: str  # the record's path as the reader sees it

    @property
    def run_line(self) -> str:
        return " ".join(["claimbench", "run", *(shlex.quote(a) for a in self.run_args)])

    def shell(self) -> str:
        """One line to paste into a clone of the project."""
        steps = [f"git checkout --detach {self.commit}"] if self.commit else []
        steps += ["./scripts/bootstrap.sh", f".venv/bin/{self.run_line}"]
        return " && ".join(steps)

    def lines(self) -> list[str]:
        """The steps as a reader wants them: what to run, where, and the one-command shortcut."""
        out = [f"needs      {self.needs}"]
        if self.commit:
            out.append(f"commit     {self.commit}")
        else:
            out.append("commit     unknown: the run came from outside a git checkout; the code cannot be recovered")
        out.append(f"run        {self.shell()}")
        if self.commit:
            out.append(f"or         claimbench reproduce {shlex.quote(self.record)}")
        return out


def recipe(rec: Record, shown_path: str) -> Recipe:
    """The steps for `rec`, found at `shown_path` (as the reader should type it)."""
    args = [rec.claim_path]
    processes = {p for side in (rec.kernel, rec.baseline) for p in side.processes}
    if len(processes) > 1:
        args += ["--repeat", str(len(processes))]
    if rec.mode == HOT_MODE:
        args.append("--hot")
    cpu = rec.hardware.get("cpu") if isinstance(rec.hardware.get("cpu"), dict) else {}
    threads, cores = cpu.get("threads_used"), cpu.get("cores")
    if rec.hardware.get("device") == "cpu" and isinstance(threads, int) and isinstance(cores, int) and threads < cores:
        args += ["--threads", str(threads)]
    return Recipe(rec.git_commit, rec.claim_path, tuple(args), needs(rec), shown_path)


def needs(rec: Record) -> str:
    """The machine in words: GPU model and count, or the CPU model and the cores the run used."""
    hw = rec.hardware
    gpus = [g for g in hw.get("gpus") or [] if isinstance(g, dict)]
    if hw.get("device") == "cuda" and gpus:
        names = sorted({str(g.get("name")) for g in gpus})
        cc = sorted({str(g.get("compute_capability")) for g in gpus if g.get("compute_capability")})
        sms = sorted({int(g["sm_count"]) for g in gpus if isinstance(g.get("sm_count"), int)})
        extra = ", ".join(([f"compute capability {'/'.join(cc)}"] if cc else [])
                          + ([f"{'/'.join(map(str, sms))} SMs"] if sms else []))
        return f"{len(gpus)} x {' / '.join(names)}" + (f" ({extra})" if extra else "")
    cpu = hw.get("cpu") if isinstance(hw.get("cpu"), dict) else {}
    model = cpu.get("model") or hw.get("name") or "a CPU"
    used = cpu.get("threads_used")
    cores = cpu.get("cores")
    detail = ", ".join(([f"{cores} cores"] if cores else []) + ([f"{used} threads used"] if used else []))
    return f"CPU {model}" + (f" ({detail})" if detail else "") + "; a different CPU gives a different number"


@dataclass(frozen=True)
class Comparison:
    """The old record against the new run: same verdict, and intervals that overlap."""

    old_verdict: str
    new_verdict: str
    old_value: Optional[float]
    new_value: Optional[float]
    old_ci: tuple[Optional[float], Optional[float]]
    new_ci: tuple[Optional[float], Optional[float]]
    new_reason: str
    new_record: Optional[Path]

    @property
    def overlap(self) -> Optional[bool]:
        (a, b), (c, d) = self.old_ci, self.new_ci
        if None in (a, b, c, d):
            return None
        return a <= d and c <= b

    @property
    def reproduced(self) -> bool:
        if self.old_verdict != self.new_verdict:
            return False
        if self.old_value is None and self.new_value is None:
            return True
        return self.overlap is True

    def lines(self, metric: str) -> list[str]:
        def val(v, ci):
            if v is None:
                return "-"
            return f"{metric} {v:.4g}" + (f" [95% CI {ci[0]:.4g}, {ci[1]:.4g}]" if None not in ci else "")

        out = [f"  before  {self.old_verdict:<12} {val(self.old_value, self.old_ci)}",
               f"  now     {self.new_verdict:<12} {val(self.new_value, self.new_ci)}  ({self.new_reason})"]
        if self.new_record:
            out.append(f"  new record {self.new_record}")
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


def rerun(rec: Record, root: Path, results: Path, *, timeout_s: float = 900.0,
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
        from claimbench.runner import RunOptions, run_claims

        steps = recipe(rec, "")
        repeat = int(steps.run_args[steps.run_args.index("--repeat") + 1]) if "--repeat" in steps.run_args else 1
        threads = int(steps.run_args[steps.run_args.index("--threads") + 1]) if "--threads" in steps.run_args else None
        opts = RunOptions(results=results, timeout_s=timeout_s, repeat=repeat, hot=rec.mode == HOT_MODE,
                          progress=progress, threads=threads)
        _, outcomes = run_claims([project / rec.claim_path], project, opts)
    finally:
        _git(top, "worktree", "remove", "--force", str(tree), check=False)
        shutil.rmtree(scratch, ignore_errors=True)
        _git(top, "worktree", "prune", check=False)
    o = outcomes[0]
    return Comparison(rec.verdict, o.status.value, rec.value, o.value, (rec.ci_low, rec.ci_high),
                      (o.ci_low, o.ci_high), o.reason, o.record_path)
