"""What every stage shares: its context (deadline, device, folders), printing, subprocesses with
a time limit, and the small JSON file through which a stage reports to the orchestrator."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

# Reference figures measured before on an H200 of this workplace (.library/device/KINDS.md,
# 2026-10-28 and 2026-11-04): a device-to-device copy, bytes read + written, and an 8192^3 bf16
# matmul on random data (769 to 798 TFLOP/s).
REFERENCE = {"copy_gbps": 4300.0, "bfloat16_tflops": 790.0}


@dataclass(frozen=True)
class Ctx:
    root: str
    results: str          # claimbench results folder (records land in results/records)
    art: str              # this run's artifacts: results/gpu-check/<stamp>
    device: str           # "cuda" on the H200, "cpu" in the rehearsal
    dry_run: bool
    deadline: float       # time.time() by which the stage must be done
    python: str
    claims: tuple[str, ...] = ()
    repeat_claim: Optional[str] = None
    extra: dict = field(default_factory=dict)

    def left_s(self) -> float:
        return self.deadline - time.time()

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=1))

    @classmethod
    def load(cls, path: Path) -> "Ctx":
        d = json.loads(Path(path).read_text())
        d["claims"] = tuple(d.get("claims") or ())
        return cls(**d)

    @property
    def art_path(self) -> Path:
        return Path(self.art)


def say(msg: str = "") -> None:
    print(msg, flush=True)


def write_result(ctx: Ctx, name: str, status: str, summary: str, data: Optional[dict] = None) -> None:
    """status: ok (targets met) | miss (ran, a target missed) | fail | partial | skipped."""
    path = ctx.art_path / f"stage-{name}.json"
    path.write_text(json.dumps({"stage": name, "status": status, "summary": summary, "data": data or {}},
                               indent=1, default=str))


@dataclass(frozen=True)
class Proc:
    rc: Optional[int]
    out: str
    err: str
    seconds: float
    timed_out: bool

    @property
    def text(self) -> str:
        return self.out + ("\n" + self.err if self.err else "")


def run_cmd(cmd: list[str], *, timeout_s: float, cwd: Optional[Path] = None, env: Optional[dict] = None,
            log: Optional[Path] = None) -> Proc:
    """Run in a new process group; on timeout the whole group is killed (grandchildren too)."""
    t0 = time.monotonic()
    full_env = {**os.environ, **(env or {})}
    try:
        p = subprocess.Popen(cmd, cwd=str(cwd) if cwd else None, env=full_env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
    except OSError as e:
        return Proc(None, "", f"could not start {cmd[0]}: {e}", 0.0, False)
    registry = os.environ.get("GPU_CHECK_PGIDS")
    if registry:  # the orchestrator kills these groups when the stage ends, whatever happened
        with open(registry, "a") as f:
            f.write(f"{p.pid}\n")
    timed_out = False
    try:
        out, err = p.communicate(timeout=max(1.0, timeout_s))
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(p)
        out, err = p.communicate()
    secs = time.monotonic() - t0
    if log is not None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text(f"$ {' '.join(cmd)}\n# rc={p.returncode} timed_out={timed_out} {secs:.1f}s\n"
                       f"--- stdout\n{out}\n--- stderr\n{err}\n")
    return Proc(p.returncode, out or "", err or "", secs, timed_out)


def kill_group(p: subprocess.Popen) -> None:
    kill_tree(p.pid)


def descendants(pid: int) -> list[int]:
    """Every process below `pid`, from /proc: children that started their own session (the
    runner's claim process does) are not in its process group, and must not outlive it."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL `pid`'s process group and every descendant of it (by id, found first)."""
    below = descendants(pid)
    for target in [pid, *below]:
        for kill in (os.killpg, os.kill):
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError, OSError):
                pass


def tail(text: str, lines: int = 6) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def load_json(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def fmt(x: Optional[float], spec: str = ".4g") -> str:
    return "-" if x is None else format(x, spec)


def setup_paths(root: Path) -> None:
    """Kernel modules import as `kernels.x` and stage modules as `gpucheck.x`."""
    for p in (str(root), str(root / "scripts")):
        if p not in sys.path:
            sys.path.insert(0, p)
