"""Claims that need several devices (`hardware.count: N > 1`): N rank processes, one result.

The parent (this module, no torch) starts N processes of ``claimbench.distributed_rank`` with the
environment ``torchrun`` would give them (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR=127.0.0.1, a
free MASTER_PORT), each in its own session so that it can be killed with its whole process group.
It does not use torchrun itself: torchrun's elastic agent restarts failed workers and owns their
lifetime, while a claim needs the opposite, one attempt, and every rank reaped by us.

Rank 0 writes the result file; every rank writes a small status file (its phase, or its error).
As soon as one rank fails, the others get a short grace period and are then killed: a rank blocked
in a collective on a dead peer must not wait for the process-group timeout. On the per-claim time
limit every rank is killed and reaped, and the result is `timeout` naming each rank's last phase.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

from claimbench.execute import reap

TAIL_BYTES = 2000
POLL_S = 0.05


def free_port() -> int:
    """A TCP port that was free a moment ago (the rendezvous binds it right after)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rank_env(rank: int, nranks: int, port: int, device: str, extra: Optional[dict] = None) -> dict[str, str]:
    from .execute import claim_env

    env = {**claim_env(extra or {}), "RANK": str(rank), "WORLD_SIZE": str(nranks), "LOCAL_RANK": str(rank),
           "LOCAL_WORLD_SIZE": str(nranks), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    if device == "cpu":  # N ranks share the cores: do not let each one start a thread per core
        env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nranks))
    return env


def run_distributed(job: dict, nranks: int, timeout_s: float, *, grace_s: float = 3.0,
                    progress: Optional[Callable[[str], None]] = None, env_extra: Optional[dict] = None) -> dict:
    """Run one claim on ``nranks`` processes; always returns the worker's result dict.

    ``job`` is the runner's worker job (root, claim, device, dtype, mode, seeds, timing, ...);
    ``job["pg_timeout_s"]`` optionally sets the process-group timeout (default: ``timeout_s``), and
    ``job["log_path"]``, when set, receives every rank's output afterwards. ``env_extra`` is the
    backend's environment for the child (e.g. TRITON_INTERPRET on CPU).
    """
    if nranks < 2:
        raise ValueError("run_distributed needs at least 2 ranks")
    res = _attempt(job, nranks, timeout_s, grace_s, progress or (lambda msg: None), env_extra)
    why = res.get("outcome_reason", "").lower()
    if res.get("outcome") == "error" and ("address already in use" in why or "eaddrinuse" in why):
        res = _attempt(job, nranks, timeout_s, grace_s, progress or (lambda msg: None), env_extra)  # lost the port race
    return res


def _attempt(job: dict, nranks: int, timeout_s: float, grace_s: float, say: Callable[[str], None],
             env_extra: Optional[dict]) -> dict:
    with tempfile.TemporaryDirectory(prefix="claimbench-dist-") as tmp:
        out = Path(tmp)
        job = {k: v for k, v in job.items() if k != "result_fd"}
        job.update(out_dir=str(out), pg_timeout_s=float(job.get("pg_timeout_s") or timeout_s))
        (out / "job.json").write_text(json.dumps(job))
        port = free_port()
        procs: list[subprocess.Popen] = []
        logs = []
        try:
            for r in range(nranks):
                log = open(out / f"rank{r}.log", "wb")
                logs.append(log)
                procs.append(subprocess.Popen(
                    [sys.executable, "-m", "claimbench.distributed_rank", str(out / "job.json")],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    env=rank_env(r, nranks, port, job["device"], env_extra), cwd=job.get("root") or None,
                    start_new_session=True))
            timed_out = _supervise(procs, out, timeout_s, grace_s, say)
        finally:
            for p in procs:
                reap(p, kill=p.poll() is None)   # kill the group of a rank still running
            for log in logs:
                log.close()
            _keep_logs(out, nranks, job.get("log_path"))
        return _collect(out, procs, nranks, timeout_s, timed_out, job)


def _keep_logs(out: Path, nranks: int, log_path: Optional[str]) -> None:
    if not log_path:
        return
    try:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "wb") as f:
            for r in range(nranks):
                f.write(f"===== rank {r} =====\n".encode())
                f.write((out / f"rank{r}.log").read_bytes() if (out / f"rank{r}.log").exists() else b"")
    except OSError:
        pass


def _supervise(procs: list[subprocess.Popen], out: Path, timeout_s: float, grace_s: float,
               say: Callable[[str], None]) -> bool:
    """Wait for every rank; kill all on the deadline, or `grace_s` after the first rank failed."""
    deadline = time.monotonic() + timeout_s
    failed_at: Optional[float] = None
    shown = ""
    while True:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return False
        now = time.monotonic()
        if now >= deadline:
            _kill_all(procs)
            return True
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = now
        if failed_at is not None and now - failed_at >= grace_s:
            _kill_all(procs)
            return False
        phase = _status(out, 0).get("phase", "")
        if phase and phase != shown:
            say(phase)
            shown = phase
        time.sleep(POLL_S)


def _kill_all(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _status(out: Path, rank: int) -> dict:
    try:
        return json.loads((out / f"rank{rank}.status.json").read_text())
    except (OSError, ValueError):
        return {}


def _tail(path: Path) -> str:
    try:
        data = path.read_bytes()[-TAIL_BYTES:].decode("utf-8", "replace").strip()
    except OSError:
        return ""
    return data.splitlines()[-1][:300] if data else ""


def _exit_text(code: Optional[int]) -> str:
    if code is not None and code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


def _collect(out: Path, procs: list[subprocess.Popen], nranks: int, timeout_s: float,
             timed_out: bool, job: dict) -> dict:
    statuses = [_status(out, r) for r in range(nranks)]
    base = {"hardware_match": job.get("mode") == "measured", "mode": job.get("mode"),
            "seeds": job.get("seeds"), "ranks": nranks}
    if timed_out:
        phases = "; ".join(f"rank {r}: {s.get('phase') or 'starting'}" for r, s in enumerate(statuses))
        return {**base, "outcome": "timeout",
                "outcome_reason": f"no result within the {timeout_s:g} s limit; all {nranks} rank processes "
                                  f"were killed and reaped (last phases: {phases})"}
    errors = [(s.get("t", float("inf")), r, s["error"]) for r, s in enumerate(statuses) if s.get("error")]
    if errors:  # the earliest error is the cause; later ones are usually peers losing the connection
        _, r, msg = min(errors)
        return {**base, "outcome": "error", "outcome_reason": f"rank {r}: {msg}",
                "rank_errors": {str(rr): m for _, rr, m in sorted(errors)}}
    bad = [(r, p.returncode) for r, p in enumerate(procs) if p.returncode != 0]
    if bad:
        r, code = bad[0]
        tail = _tail(out / f"rank{r}.log")
        return {**base, "outcome": "error",
                "outcome_reason": f"rank {r} {_exit_text(code)} before reporting" + (f": {tail}" if tail else "")}
    try:
        result = json.loads((out / "result.json").read_text())
    except (OSError, ValueError):
        return {**base, "outcome": "error", "outcome_reason": "rank 0 exited without writing a result"}
    return {**base, **result}
