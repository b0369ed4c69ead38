"""One rank's orchestrator of a multi-rank claim, started by torch's launcher (torchrun).

`python -m torch.distributed.run ... -m claimbench.orchestrator.ranks JOBDIR`: every worker the launcher
starts is an orchestrator like the single-rank one, with its own fork server and its own task,
kernel and baseline sides, driving the same `orchestrate`. The orchestrators keep in step through
their own connections to rank 0's (coordinate.Ranks; no torch in an orchestrator); each role's sides
form a process group of their own on the launcher's store. A rank that stops where the others
cannot know exits at once with status 1, and the launcher (no restarts) stops the whole group; rank 0
writes the merged result.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from claimbench.orchestrator.coordinate import Ranks
from claimbench.orchestrator.job import ClaimRun, Correctness, TimedChecks, job_from_dict
from claimbench.orchestrator.orchestrate import orchestrate
from claimbench.orchestrator.processes import ForkServer
from claimbench.orchestrator.ranked import merge_correctness, tagged, topology
from claimbench.orchestrator.sandbox import choose
from claimbench.orchestrator.servers import server_env


def main(argv: list[str]) -> int:
    """One rank's run of ``argv[1]``, the job folder: reads job.json, keeps rank<N>.json current, rank 0 writes
    result.json. Never returns: exits 1 when this rank failed or stopped alone, so the launcher ends the group."""
    out = Path(argv[1])
    spec = json.loads((out / "job.json").read_text())
    rank = int(os.environ.get("RANK", "0"))
    status = out / f"rank{rank}.json"
    _write(status, {"phase": "starting"})
    try:
        coord = Ranks(spec["job"]["timeout_s"], job_dir=out, nodes=int(spec.get("nodes", 1)))
        spec = coord.broadcast(spec)  # rank 0's seeds and settings, whichever node launched us
        job = job_from_dict(spec["job"])
        seeds = {k: ([s + rank for s in v] if isinstance(v, list) else v + rank) for k, v in job.seeds.items()}
        job = job.__class__(**{**job.__dict__, "seeds": seeds,
                               "log_path": job.log_path.with_name(f"{job.log_path.stem}-rank{rank}.log") if job.log_path else None})
        local = int(os.environ.get("LOCAL_RANK", "0"))
        group = {"local_rank": local, "master_addr": os.environ["MASTER_ADDR"], "master_port": int(os.environ["MASTER_PORT"]),
                 "prefix": f"claimbench/{spec['run_id']}"}
        sandbox = choose(spec["sandbox"], cuda=job.device == "cuda", network=True)
        server = ForkServer(job.root, server_env(job.threads, job.env), sandbox=sandbox, log_path=out / f"rank{rank}-server.log")
        try:
            run = orchestrate(job, server, lambda msg: _write(status, {"phase": msg[:200]}), coord=coord, group=group)
        finally:
            server.close()
        _write(status, {"phase": "done", "run": run.to_dict(), "t": time.time()})
        if run.alone:
            os._exit(1)  # the launcher ends the others; the parent reads every rank's status
        runs = coord.gather(run.to_dict())
        if rank == 0:
            merged = merge(runs, job, int(spec.get("nodes", 1)))
            _write(out / "result.json", merged.to_dict())
        coord.close()
    except BaseException as e:  # report, never raise: the parent turns it into `error`
        first = (str(e).strip().splitlines() or [""])[0]
        _write(status, {"phase": "failed", "error": f"{type(e).__name__}: {first}"[:500], "t": time.time()})
        import traceback
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)


def merge(runs: list[dict], job, nodes: int) -> ClaimRun:
    """Rank 0's view of the claim: its own timing (every sample already the max over ranks), every
    rank's correctness, rejections and timed checks. ``runs`` are the ranks' `ClaimRun.to_dict()`s,
    as the orchestrators' group gathered them."""
    mine = [ClaimRun.from_dict(r) for r in runs]
    rejections = tagged([list(r.rejections) for r in mine])
    corr = merge_correctness([r.correctness or Correctness() for r in mine], job.device, job.dtype, rejections=rejections)
    checks = [r.timed_checks for r in mine if r.timed_checks]
    summed = TimedChecks(checked=sum(c.checked for c in checks), failed=sum(c.failed for c in checks),
                         perturbed=sum(c.perturbed for c in checks), ranks=tuple(checks),
                         flipped=sum(c.flipped for c in checks), swept_bytes=max(c.swept_bytes for c in checks),
                         unperturbed=next((c.unperturbed for c in checks if c.unperturbed), "")) if checks else None
    nccl = None
    if job.device == "cuda":
        import torch
        v = torch.cuda.nccl.version()
        nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    uuids = [str(g.get("uuid") or "") for g in (job.hardware.get("gpus") or [])][:len(runs)] if job.device == "cuda" else []
    return replace(mine[0], rejections=tuple(rejections), correctness=corr,
                   timed_checks=summed,
                   topology=topology(len(runs), nodes, "nccl" if job.device == "cuda" else "gloo", gpu_uuids=uuids, nccl_version=nccl))


def _write(path: Path, data: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, path)


if __name__ == "__main__":
    main(sys.argv)
