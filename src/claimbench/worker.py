"""The child process: runs one claim's stages and sends plain data back to the parent.

Order matters for honesty. Timers are bound and torch is snapshotted before any kernel module is
imported. The kernel is always called before the baseline and the reference on the same inputs,
and every output is poisoned with NaN before it is freed, so neither ``gc`` nor memory that
``torch.empty`` hands out again holds an answer while the kernel runs. The parent writes the
record; this process only reports.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from . import timing  # noqa: F401  (binds perf_counter_ns before kernels are imported)


def _emit(fd: int, obj: dict) -> None:
    os.write(fd, (json.dumps(obj, default=str, allow_nan=True) + "\n").encode())


def main() -> int:
    # Imports first, the job second: a process started before its claim was known spends this
    # second while the parent is still starting up.
    import torch  # noqa: F401

    from . import guard, session, verify  # noqa: F401
    from .claim import Claim  # noqa: F401

    ready_fd = os.environ.pop("CLAIMBENCH_RESULT_FD", "")  # not left where a kernel would look first
    if ready_fd.isdigit():  # imports done: the parent may measure
        _emit(int(ready_fd), {"ready": True})
    job = json.loads(sys.stdin.read())
    fd = int(job["result_fd"])
    _log_to(job.get("log_path"))
    os.environ.update({str(k): str(v) for k, v in (job.get("env") or {}).items()})
    try:
        result = run_job(job, progress=lambda msg: _emit(fd, {"progress": msg}))
    except BaseException as e:  # report, never raise: the parent turns it into `error`
        result = {"outcome": "error", "outcome_reason": f"{type(e).__name__}: {e}".splitlines()[0][:500],
                  "traceback": traceback.format_exc()[-4000:]}
    _emit(fd, {"result": result})
    os.close(fd)
    sys.stdout.flush()
    os._exit(0)  # skip interpreter teardown: a kernel's atexit hooks cannot rewrite anything


def _log_to(path) -> None:
    """From here on, this process's output goes to the claim's log file."""
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def run_job(job: dict, progress) -> dict:
    import torch

    from . import guard, verify
    from .claim import Claim

    if os.environ.get("OMP_NUM_THREADS", "").isdigit():
        torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    root = Path(job["root"]).resolve()
    claim = Claim.model_validate(job["claim"])
    device = job["device"]
    dtype = job["dtype"]
    from .loader import load, project_modules
    from .session import Session

    progress("loading the claim's modules")
    s = Session(claim, root, device, dtype, load, progress)
    # Taken after the kernel modules loaded: torch rebinds a few names lazily on first use of
    # its submodules, and import-time patching is the static rules' job (rules.py).
    progress("snapshotting torch and the timers")
    guard.prime()
    snap = guard.Snapshot()
    snap.add("baseline", s.baseline)
    res: dict[str, Any] = {"rejections": [], "seeds": job["seeds"]}
    progress("checking that the inputs follow the seed")
    problems = s.static_and_seed_checks(job["seeds"]["sensitivity"])
    res["rejections"] += problems
    if not problems:
        corr = s.correctness(job["seeds"]["trials"], measured=job["mode"] == "measured")
        res["correctness"] = corr
        res["rejections"] += corr.pop("rejections", [])
        if job["mode"] == "measured" and corr["passed"] and not res["rejections"]:
            res.update(s.measure(job))
            res["rejections"] += res.pop("measure_rejections", [])
    changed = [n for n in snap.changed(lambda n: s.baseline if n == "baseline" else guard._current(n))]
    if changed:
        res["rejections"].append(f"functions changed behind the harness's back: {', '.join(sorted(changed)[:5])}")
    res["loaded_sources"] = project_modules(root)
    res["torch_threads"] = torch.get_num_threads()
    res["host_allocator"] = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    return res


if __name__ == "__main__":
    sys.exit(main())
