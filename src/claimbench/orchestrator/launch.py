"""Multi-rank claims go through torch's own launcher, so they can span the nodes of a fleet.

`torch.distributed.run` starts one orchestrator per rank (orchestrator/ranks.py) with no restarts: when one
fails, the launcher stops the whole group. On one machine it runs `--standalone`; across machines
every node runs `claimbench run --node-rank K --master-addr HOST --master-port PORT` on the same
claim (Slurm: one task per node, `--node-rank $SLURM_NODEID`), and rank 0's node writes the record.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from claimbench.orchestrator import census
from claimbench.orchestrator.job import ClaimRun, Job, job_to_dict


@dataclass(frozen=True)
class Nodes:
    """This node's place in a launch: ``rank`` of ``count`` nodes; the master address and port matter only
    when ``count`` > 1."""

    count: int = 1
    rank: int = 0
    master_addr: Optional[str] = None
    master_port: Optional[int] = None


def launch(job: Job, ranks: int, nodes: Nodes, *, sandbox: str, run_id: str,
           say: Callable[[str], None] = lambda msg: None) -> ClaimRun:
    """Run ``job`` on ``ranks`` ranks over ``nodes``; always returns a ClaimRun, a failure included."""
    if ranks % nodes.count:
        return ClaimRun(outcome="error", outcome_reason=f"{ranks} ranks do not divide over {nodes.count} nodes")
    per_node = ranks // nodes.count
    with tempfile.TemporaryDirectory(prefix="claimbench-ranks-") as tmp:
        out = Path(tmp)
        (out / "job.json").write_text(json.dumps({"job": job_to_dict(job), "sandbox": sandbox, "run_id": run_id,
                                                   "nodes": nodes.count}, default=str))
        argv = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nodes.count}",
                f"--nproc-per-node={per_node}", "--max-restarts=0", "--monitor-interval=0.2",
                # torch's launcher otherwise makes a torchelastic_* folder of its own in the system's
                # temporary folder and leaves it there after every multi-rank claim
                f"--log-dir={out / 'elastic'}"]
        if nodes.count == 1:
            argv.append("--standalone")
        else:
            argv += [f"--node-rank={nodes.rank}", f"--master-addr={nodes.master_addr}", f"--master-port={nodes.master_port}"]
        argv += ["-m", "claimbench.orchestrator.ranks", str(out)]
        log = open(out / "launcher.log", "wb")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                cwd=str(job.root), start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1",
                                                                                    "CLAIMBENCH_RUN_PID": str(os.getpid())})
        timed_out = _wait(proc, out, ranks, timeout_s=job.timeout_s + 60.0, say=say)
        log.close()
        _keep_logs(out, job.log_path)
        return _collect(out, proc, ranks, per_node=per_node, nodes=nodes, timed_out=timed_out, timeout_s=job.timeout_s)


def _wait(proc: subprocess.Popen, out: Path, ranks: int, *, timeout_s: float, say) -> bool:
    deadline, shown = time.monotonic() + timeout_s, ""
    while proc.poll() is None:
        if time.monotonic() > deadline:
            _kill_tree(proc)
            return True
        phase = _status(out, 0).get("phase", "")
        if phase and phase != shown:
            say(phase)
            shown = phase
        time.sleep(0.1)
    _kill_tree(proc)  # what the launcher left, if anything
    return False


def _kill_tree(proc: subprocess.Popen) -> None:
    for pid in census.tree([proc.pid]):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _status(out: Path, rank: int) -> dict:
    try:
        return json.loads((out / f"rank{rank}.json").read_text())
    except (OSError, ValueError):
        return {}


def _collect(out: Path, proc: subprocess.Popen, ranks: int, *, per_node: int, nodes: Nodes, timed_out: bool,
             timeout_s: float) -> ClaimRun:
    """The claim's run as rank 0 merged it, or, where no rank got that far, the earliest failure
    (every rank's reason kept) or why the launcher ended."""
    mine = range(nodes.rank * per_node, (nodes.rank + 1) * per_node)
    statuses = {r: _status(out, r) for r in mine}
    if timed_out:
        phases = "; ".join(f"rank {r}: {s.get('phase') or 'starting'}" for r, s in statuses.items())
        return ClaimRun(outcome="timeout", outcome_reason=f"no result within the {timeout_s:g} s limit; every rank "
                        f"process was killed and reaped (last phases: {phases})")
    if (out / "result.json").exists():
        return ClaimRun.from_dict(json.loads((out / "result.json").read_text()))
    # someone stopped alone: the earliest rank that failed or ended with a reason is the cause
    failed: list[tuple[float, int, ClaimRun]] = []
    for r, s in statuses.items():
        run = s.get("run") or {}
        if s.get("error"):
            failed.append((s.get("t", 1e18), r, ClaimRun(outcome="error", outcome_reason=str(s["error"]))))
        elif run.get("alone"):
            failed.append((s.get("t", 1e18), r, ClaimRun.from_dict(run)))
    if failed:
        failed.sort(key=lambda x: (x[0], x[1]))
        _, r, first = failed[0]
        reason = first.outcome_reason
        if reason:
            # the earliest first; the others too, since a crashed rank's peers fail in the same instant
            # (gloo: "connection closed by peer") and the clocks cannot always order them
            others = [f"rank {r2}: {x.outcome_reason}" for _, r2, x in failed[1:] if x.outcome_reason]
            reason = "; ".join([f"rank {r}: {reason}"] + others)
        corr = first.correctness
        if corr is not None and corr.passed is False:
            corr = replace(corr, reason=f"rank {r}: {corr.reason}")
        return replace(first, outcome_reason=reason, rejections=tuple(f"rank {r}: {x}" for x in first.rejections),
                       correctness=corr)
    if nodes.rank != 0:
        return ClaimRun(outcome="error", outcome_reason="rank 0 runs on node 0; its record is written there")
    tail = (out / "launcher.log").read_text(errors="replace").strip().splitlines()[-1:] if (out / "launcher.log").exists() else []
    return ClaimRun(outcome="error", outcome_reason=f"the launcher {census.exit_text(proc.returncode << 8 if proc.returncode and proc.returncode > 0 else None)}"
                    f" without a result" + (f": {tail[0][:300]}" if tail else ""))


def _keep_logs(out: Path, log_path: Optional[Path]) -> None:
    if not log_path:
        return
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as f:
            for p in sorted(out.glob("*.log")):
                f.write(f"===== {p.stem} =====\n".encode())
                f.write(p.read_bytes())
            for p in sorted(log_path.parent.glob(f"{log_path.stem}-rank*.log")):
                f.write(f"===== {p.stem} =====\n".encode())
                f.write(p.read_bytes())
                p.unlink()
    except OSError:
        pass
