"""Isolation: one child process per claim, with a time limit, talking over a private pipe.

A segfault, an illegal memory access, ``os._exit``, a hang or an out-of-memory ends only that
child; the parent turns it into ``error`` or ``timeout`` and every other claim goes on. The
child's process group is killed on timeout, so threads and grandchildren are reaped too.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Optional

TAIL_BYTES = 4000
# glibc adapts its mmap and trim thresholds to the allocations a process has made so far, so
# the same eager kernel paid page faults on its large temporaries, or did not, depending on what
# the harness allocated before timing (measured: a CPU baseline's median moved 3.2 -> 4.6 ms
# between two harness versions). Fixed thresholds make the claim process independent of that
# history; a user's own MALLOC_* settings win, and the record says which were in force.
HOST_ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


def claim_env(extra: dict) -> dict:
    """The environment of a claim process: ours, the backends' additions, a pinned allocator."""
    env = {**os.environ, **extra, "PYTHONUNBUFFERED": "1"}
    for key, value in HOST_ALLOCATOR_ENV.items():
        env.setdefault(key, value)
    return env


class ClaimProcess:
    """One claim's child process, which may start before its claim is known.

    The worker imports torch first and only then reads its job from stdin, so a process started
    early (``run_claims`` starts the first one before it detects the hardware) spends its second
    of imports while the parent starts up. The job brings the backends' environment and the log
    file; nothing claim-specific exists in the process before it."""

    def __init__(self, cwd: Path, env_extra: Optional[dict] = None) -> None:
        self.rfd, wfd = os.pipe()
        env = {**claim_env(env_extra or {}), "CLAIMBENCH_RESULT_FD": str(wfd)}
        env.setdefault("OMP_NUM_THREADS", str(os.cpu_count() or 1))
        self.early_log = tempfile.TemporaryFile()  # output before the job names the claim's log
        self.proc = subprocess.Popen([sys.executable, "-m", "claimbench.worker"], stdin=subprocess.PIPE,
                                     stdout=self.early_log, stderr=subprocess.STDOUT, pass_fds=(wfd,), env=env,
                                     cwd=str(cwd), start_new_session=True)
        os.close(wfd)
        self.result_fd, self.buf, self.used = wfd, b"", False

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Block until the imports are done, so the process is idle (ceilings are measured next)."""
        deadline = time.monotonic() + timeout_s
        while b'"ready"' not in self.buf and time.monotonic() < deadline and self.proc.poll() is None:
            ready, _, _ = select.select([self.rfd], [], [], 0.2)
            if ready:
                chunk = os.read(self.rfd, 1 << 16)
                if not chunk:
                    break
                self.buf += chunk

    def discard(self) -> None:
        """End a process that got no job (its claim was rejected or skipped)."""
        self.used = True
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        reap(self.proc, kill=True)
        os.close(self.rfd)
        self.early_log.close()


def run_child(job: dict, *, env_extra: dict, timeout_s: float, cwd: Path,
              progress: Optional[Callable[[str], None]] = None, started: Optional[ClaimProcess] = None) -> dict:
    """Run ``claimbench.worker`` on ``job`` (in ``started`` when given); always returns a result dict."""
    child = started or ClaimProcess(cwd, env_extra)
    child.used = True
    proc, rfd = child.proc, child.rfd
    log_path = job.get("log_path")
    job = {**job, "result_fd": child.result_fd, "env": env_extra}
    try:
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
    except BrokenPipeError:
        pass
    result, buf, reports = None, child.buf, 0
    deadline = time.monotonic() + timeout_s
    timed_out = False
    while True:
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if "progress" in msg and progress:
                progress(str(msg["progress"]))
            if "result" in msg:
                result, reports = msg["result"], reports + 1
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([rfd], [], [], min(left, 0.5))
        if not ready:
            if proc.poll() is not None and not _readable(rfd):
                break
            continue
        chunk = os.read(rfd, 1 << 16)
        if not chunk:
            break
        buf += chunk
    os.close(rfd)
    reap(proc, kill=timed_out or result is None)
    tail = _tail(Path(log_path)) if log_path else ""
    if not tail.strip():  # it died before it opened the claim's log
        child.early_log.seek(0)
        tail = child.early_log.read()[-TAIL_BYTES:].decode("utf-8", "replace")
    child.early_log.close()
    if timed_out:
        return {"outcome": "timeout", "outcome_reason": f"no result within the {timeout_s:g} s limit; the process group was killed"}
    if reports > 1:  # the worker reports once; a second report came from code it ran
        return {"outcome": "error", "outcome_reason": f"the claim's process sent {reports} reports where the worker "
                "sends one: something in it wrote to the report pipe"}
    if result is None:
        code = proc.returncode
        why = f"killed by signal {signal.Signals(-code).name}" if code and code < 0 else f"exited with status {code}"
        last = tail.strip().splitlines()[-1:] if tail.strip() else []
        return {"outcome": "error", "outcome_reason": f"the claim's process {why} before reporting" + (f": {last[0][:300]}" if last else "")}
    return result


def _readable(fd: int) -> bool:
    r, _, _ = select.select([fd], [], [], 0)
    return bool(r)


def reap(proc: subprocess.Popen, kill: bool) -> None:
    """Wait for a child started with ``start_new_session=True``, then SIGKILL what is left of its
    process group (threads, helpers, grandchildren); ``kill`` SIGKILLs the group first. Also used
    by distributed.py for each rank. The child leads its session, so it cannot leave the group."""
    if kill:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    try:  # the worker's own stragglers (threads die with it; grandchildren may not)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


_CEILINGS_CODE = """
import json, sys
from pathlib import Path
from claimbench.ceilings import load_or_measure
from claimbench.hardware import Hardware
job = json.loads(sys.stdin.read())
c = load_or_measure(Path(job["cache"]), Hardware.from_dict(job["hardware"]), tuple(job["dtypes"]))
print(json.dumps(c.to_dict()))
"""


def run_ceilings(hardware: dict, dtypes: list[str], cache: Path, *, env_extra: dict, timeout_s: float = 300.0) -> dict:
    """Measure (or load) the ceilings in a process that never imports a kernel: a kernel cannot
    bend the numbers its own floor and sol_fraction are computed from."""
    env = {**os.environ, **env_extra}
    proc = subprocess.run([sys.executable, "-c", _CEILINGS_CODE], input=json.dumps(
        {"hardware": hardware, "dtypes": dtypes, "cache": str(cache)}), capture_output=True, text=True,
        timeout=timeout_s, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"measuring ceilings failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
