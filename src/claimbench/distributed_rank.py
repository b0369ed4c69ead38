"""One rank of a multi-device claim: the worker's stages, run on every rank in lockstep.

Every rank builds its own inputs (the run's seeds + rank), runs the same correctness trials as the
single-device worker (``Session``: kernel first, pristine copies, poisoning, null models, trace),
then the timed rounds. Collectives only work if every rank calls them in the same order, so
every decision is made from values all ranks share: per-rank results are gathered to all ranks,
each sample's time is the maximum over ranks (a collective is done when its slowest rank is),
and the protocol's clock is rank 0's, broadcast. Rank 0 writes the result file; the parent
(``distributed.py``) writes the record.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
import traceback
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from . import timing  # noqa: F401  (binds perf_counter_ns before kernels are imported)
from .distributed_report import nvml_for, tagged, merge_correctness, topology
from .hardware import THROTTLE_MASK
from .timing import Sample

_MONOTONIC = time.monotonic


class Rank:
    """This process's place in the group, and the few collectives the protocol needs."""

    def __init__(self, device: str) -> None:
        import torch
        import torch.distributed as dist

        self.torch, self.dist, self.device = torch, dist, device
        self.rank, self.world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.local = int(os.environ.get("LOCAL_RANK", self.rank))
        self.tdev = torch.device("cuda", self.local) if device == "cuda" else torch.device("cpu")
        self.backend = "nccl" if device == "cuda" else "gloo"

    def init(self, timeout_s: float) -> None:
        kw: dict[str, Any] = {}
        if self.device == "cuda":
            self.torch.cuda.set_device(self.local)
            kw["device_id"] = self.tdev
        addr, port = os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]
        self.dist.init_process_group(self.backend, init_method=f"tcp://{addr}:{port}", rank=self.rank,
                                     world_size=self.world, timeout=timedelta(seconds=timeout_s), **kw)

    def barrier(self) -> None:
        if self.device == "cuda":
            self.dist.barrier(device_ids=[self.local])
        else:
            self.dist.barrier()

    def gather(self, obj: Any) -> list:
        """Every rank's `obj`, on every rank (so all of them take the same next step)."""
        got: list = [None] * self.world
        self.dist.all_gather_object(got, obj)
        return got

    def max(self, values: list[float]) -> list[float]:
        t = self.torch.tensor(values, dtype=self.torch.float64, device=self.tdev)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return [float(x) for x in t.tolist()]

    def clock(self) -> float:
        """Rank 0's monotonic time, so time-based stopping decides the same on every rank."""
        t = self.torch.tensor([_MONOTONIC()], dtype=self.torch.float64, device=self.tdev)
        self.dist.broadcast(t, src=0)
        return float(t.item())


class RankTimer:
    """Wraps one rank's timer: barrier, the rank's own sample, then the max over ranks."""

    def __init__(self, inner: Any, rank: Rank) -> None:
        self.inner, self.rank = inner, rank
        self.name = f"{inner.name}, max over {rank.world} ranks"
        self.mode = inner.mode
        self.flush_bytes = inner.flush_bytes
        self.l2_reset = inner.l2_reset
        self.calls_per_block = inner.calls_per_block
        self.min_block_us = float(getattr(inner, "min_block_us", 0.0) or getattr(inner, "min_block_ns", 0.0) / 1000.0)

    def call(self, fn: Callable[[], Any]) -> Any:
        self.rank.barrier()
        return self.inner.call(fn)

    def calibrate(self, side: str, fn: Callable[[], Any]) -> int:
        """Grow the block from shared (max) times, so every rank settles on the same size."""
        if self.mode == "cold":
            self.calls_per_block[side] = 1
            return 0
        n, made = 1, 0
        while True:
            self.calls_per_block[side] = n
            s = self.sample(side, fn)
            made += n
            if s.us * n >= self.min_block_us or n >= 4096:
                return made
            n *= 2

    def sample(self, side: str, fn: Callable[[], Any]) -> Sample:
        self.rank.barrier()
        s = self.inner.sample(side, fn)
        reasons = s.throttle_reasons
        clock = s.sm_clock_mhz
        us, thr, other, neg_clock = self.rank.max([
            s.us, float(int(reasons or 0) & THROTTLE_MASK), float(int(reasons or 0) & ~THROTTLE_MASK),
            -float(clock) if clock is not None else -math.inf])
        merged = None if reasons is None and thr == 0 and other == 0 else int(thr) | int(other)
        return Sample(us=us, out=s.out, throttle_reasons=merged,
                      sm_clock_mhz=None if math.isinf(neg_clock) else -neg_clock, calls=s.calls)


def _shift(seeds: dict, rank: int) -> dict:
    return {k: ([s + rank for s in v] if isinstance(v, list) else v + rank) for k, v in seeds.items()}


def measure(rank: Rank, s, job: dict) -> dict:
    """The timed rounds on every rank, with the single-device worker's re-checks of timed calls."""
    from . import verify
    from .measure import RecheckHooks
    from .timing import TimingConfig, make_timer, measure_pair

    torch = rank.torch
    params = dict(s.claim.workload.params)
    seed = int(job["seeds"]["timing"])
    inputs = s.inputs(seed, params)
    kops, bops = s.operands(inputs)
    out_k = verify.outputs(s.kernel(*kops))
    tensor_bytes = verify.nbytes(inputs) + verify.nbytes(out_k)
    verify.poison(out_k)
    del out_k
    cfg = TimingConfig.for_device(s.device, **{k: v for k, v in (job.get("timing") or {}).items() if v is not None})
    kw = {}
    if s.device == "cuda":
        props = torch.cuda.get_device_properties(rank.local)
        kw = {"l2_bytes": int(getattr(props, "L2_cache_size", 50 << 20)), "device_index": rank.local,
              **nvml_for(props)}
    timer = RankTimer(make_timer(s.device, cfg, **kw), rank)
    hooks = RecheckHooks(s, params, kops, bops, seed)
    hooks.calls = cfg.calls_per_round
    threads = set(threading.enumerate())
    pair = measure_pair(lambda: s.kernel(*kops), lambda: s.baseline(*bops), timer, cfg, hooks=hooks,
                        progress=lambda phase, detail: s.say(f"{phase}: {detail}"), clock=rank.clock)
    hooks.finish_round()
    from .guard import new_threads
    rejections = [f"kernel {t}" for t in new_threads(threads)]
    if hooks.failures:
        rejections.append(f"timed calls returned wrong answers ({len(hooks.failures)} of {hooks.checked} checked): {hooks.failures[0]}")
    return {"timing": pair.to_dict(), "tensor_bytes": float(tensor_bytes), "measure_rejections": rejections,
            "timed_checks": {"checked": hooks.checked, "failed": len(hooks.failures)}}


def run_rank(job: dict, say: Callable[[str], None]) -> dict | None:
    """This rank's part; rank 0 returns the claim's result dict, the others None."""
    from . import guard
    from .claim import Claim
    from .loader import load, project_modules
    from .session import Session

    device, root = job["device"], Path(job["root"]).resolve()
    rank = Rank(device)
    say("rendezvous")
    rank.init(float(job["pg_timeout_s"]))
    claim = Claim.model_validate(job["claim"])
    seeds = _shift(job["seeds"], rank.rank)
    s = Session(claim, root, device, job["dtype"], load, say)
    guard.prime()  # same order as worker.py: torch's lazy rebinding happens before the snapshot
    snap = guard.Snapshot()
    snap.add("baseline", s.baseline)
    res: dict[str, Any] = {"seeds": job["seeds"]}
    rejections = tagged(rank.gather(s.static_and_seed_checks(seeds["sensitivity"])))
    measured = job["mode"] == "measured"
    if not rejections:
        corr = s.correctness(seeds["trials"], measured=measured)
        res["correctness"] = merge_correctness(rank.gather(corr), device, job["dtype"])
        rejections += res["correctness"].pop("rejections", [])
        if measured and res["correctness"]["passed"] and not rejections:
            m = measure(rank, s, {**job, "seeds": seeds})
            res.update(timing=m["timing"], tensor_bytes=m["tensor_bytes"])
            checks = rank.gather([m["timed_checks"], m["measure_rejections"]])
            res["timed_checks"] = {"checked": sum(c[0]["checked"] for c in checks),
                                   "failed": sum(c[0]["failed"] for c in checks), "ranks": [c[0] for c in checks]}
            rejections += tagged([c[1] for c in checks])
    changed = snap.changed(lambda n: s.baseline if n == "baseline" else guard._current(n))
    if changed:
        rejections.append(f"functions changed behind the harness's back: {', '.join(sorted(changed)[:5])}")
    rejections = tagged(rank.gather(rejections))
    topo = topology(rank)
    loaded = sorted({f for fs in rank.gather(project_modules(root)) for f in fs})
    threads = rank.torch.get_num_threads()
    rank.barrier()
    if rank.rank != 0:
        return None
    res.update(rejections=rejections, topology=topo, loaded_sources=loaded, torch_threads=threads,
               host_allocator={k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
               hardware_match=measured, mode=job["mode"])
    if "timing" in res:
        res["protocol"] = {"topology": topo, "rank_timing": "barrier, then each rank's sample; the sample is the max over ranks"}
        res["ceilings"] = _ceilings(job, device)
    return res


def _ceilings(job: dict, device: str) -> dict | None:
    try:
        from .measure import _ceilings as single_device_ceilings
        return single_device_ceilings(job, device)
    except Exception:
        return None


class _Status:
    """This rank's status file: its current phase, or its error, for the parent to read."""

    def __init__(self, out: Path, rank: int) -> None:
        self.path, self.tmp = out / f"rank{rank}.status.json", out / f".rank{rank}.status.tmp"

    def write(self, **data: Any) -> None:
        self.tmp.write_text(json.dumps({**data, "t": time.time()}, default=str))
        os.replace(self.tmp, self.path)


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text())
    out = Path(job["out_dir"])
    rank = int(os.environ["RANK"])
    status = _Status(out, rank)
    status.write(phase="starting")
    code = 0
    try:
        res = run_rank(job, lambda msg: status.write(phase=str(msg)[:200]))
        if res is not None:
            tmp = out / ".result.tmp"
            tmp.write_text(json.dumps(res, default=str, allow_nan=True))
            os.replace(tmp, out / "result.json")
        status.write(phase="done")
    except BaseException as e:  # report, never raise: the parent turns it into `error`
        first = (str(e).strip().splitlines() or [""])[0]
        status.write(phase="failed", error=f"{type(e).__name__}: {first}"[:500])
        sys.stderr.write(traceback.format_exc()[-4000:])
        code = 1
    sys.stderr.flush()
    os._exit(code)  # no interpreter or process-group teardown: a dead peer must not hang us here


if __name__ == "__main__":
    main(sys.argv)
