"""How to re-derive one record's number: data only (no torch, no git), so `show`, the site and
`claimbench reproduce` print the same steps: check out the record's commit, install, run the one
claim with the flags that shaped the measurement, on the hardware it names."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Optional

from claimbench.store.atcommit import COMMIT
from claimbench.store.record import Record

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
        steps = [f"git checkout --detach {shlex.quote(self.commit)}"] if self.commit else []
        steps += ["./scripts/bootstrap.sh", f".venv/bin/{self.run_line}"]
        return " && ".join(steps)

    def lines(self) -> list[str]:
        """The steps as a reader wants them: what to run, where, and the one-command shortcut."""
        out = [f"needs      {self.needs}"]
        if self.commit:
            out.append(f"commit     {self.commit}")
        else:
            out.append("commit     unknown: the record names no commit hash; the code cannot be recovered")
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
    cpu = got if isinstance(got := rec.hardware.get("cpu"), dict) else {}
    threads, cores = cpu.get("threads_used"), cpu.get("cores")
    if rec.hardware.get("device") == "cpu" and isinstance(threads, int) and isinstance(cores, int) and threads < cores:
        args += ["--threads", str(threads)]
    # only a commit hash reaches the shell line: a record's `git_commit` of "HEAD; curl ... | sh" was
    # printed as a command to paste (an adversarial review, 2026-12-06)
    commit = rec.git_commit if rec.git_commit and COMMIT.fullmatch(rec.git_commit) else None
    return Recipe(commit, rec.claim_path, tuple(args), needs(rec), shown_path)


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
    cpu = got if isinstance(got := hw.get("cpu"), dict) else {}
    model = cpu.get("model") or hw.get("name") or "a CPU"
    used = cpu.get("threads_used")
    cores = cpu.get("cores")
    detail = ", ".join(([f"{cores} cores"] if cores else []) + ([f"{used} threads used"] if used else []))
    return f"CPU {model}" + (f" ({detail})" if detail else "") + "; a different CPU gives a different number"
