"""The runner: check, detect, match, execute in a child, decide, record. One claim at a time.

The parent never imports a kernel. It decides the verdict from the child's plain data with the
same pure function ``audit`` uses, then writes the record itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from claimbench import __version__
from claimbench.gate.policy import gate_file
from claimbench.gate.srcgraph import claim_sources
from claimbench.machine import backends
from claimbench.machine.hardware import Hardware, blockers, matches
from claimbench.options import RunOptions
from claimbench.run import filecensus
from claimbench.run.job import Job
from claimbench.run.lock import one_claim_at_a_time
from claimbench.run.orchestrate import orchestrate
from claimbench.run.sandbox import default_max_memory
from claimbench.run.seeds import draw_seeds
from claimbench.spec import expr
from claimbench.stats.precision import MIN_PROCESSES, evidence_fields
from claimbench.stats.status import Status
from claimbench.stats.verdict import Evidence, Samples, decide
from claimbench.store.record import (
    PROTOCOL_VERSION,
    Record,
    RecordWriteError,
    SideTiming,
    check_writable,
    claim_copy,
    keep_unwritable,
    sha256_file,
    utc_now,
    write_record,
)

CPU_CHECK_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int8", "uint8")  # what CPU torch computes


@dataclass(frozen=True)
class Outcome:
    claim_id: str
    path: Path
    status: Status
    reason: str
    record_path: Optional[Path] = None
    value: Optional[float] = None
    ci_low: Optional[float] = None
    ci_high: Optional[float] = None
    metric: Optional[str] = None
    claimed_value: Optional[float] = None
    hardware: str = ""
    checked: bool = False  # its correctness check ran and passed (a skip for hardware carries it too)


def run_claims(paths: list[Path], root: Path, opts: RunOptions, hw: Optional[Hardware] = None,
               select: Optional[Callable[[list[Path], Hardware], list[Path]]] = None) -> tuple[Hardware, list[Outcome]]:
    """Detect, then run each claim. The first claim's process starts before anything else, so
    its torch import overlaps detection and checking; ``select`` may narrow the claims once the
    hardware is known."""
    from claimbench.machine.detect import detect
    from claimbench.run.servers import Servers
    from claimbench.spec.project import load_listing

    outcomes = []
    if paths:
        check_writable(opts.results)  # one line now, not a lost measurement later
        swept = filecensus.sweep_backups()
        if swept and opts.progress:
            opts.progress(f"removed {len(swept)} backup folder(s) left by killed runs: "
                          + ", ".join(str(p) for p in swept[:3]) + (" ..." if len(swept) > 3 else ""))
    with Servers(root, opts) as servers:
        if paths:
            servers.start_early()  # its torch import overlaps detection and checking
        hw = hw or detect(root)
        paths = select(paths, hw) if select else paths
        listing = load_listing(root)
        opts.progress and opts.progress(f"hardware: {hw.name} ({hw.device}); {len(paths)} claim(s)")
        if paths and opts.progress and hw.device == "cpu" and not opts.correctness_only:
            _say_if_busy(opts.progress)
        for p in paths:
            outcomes.append(run_one(p, root, hw, opts, listing=listing, servers=servers))
    return hw, outcomes


def _say_if_busy(say: Callable[[str], None]) -> None:
    """One line at the start when the machine is already busy: a CPU number measured now ends
    `inconclusive` ("machine busy"), and saying so after minutes of rounds wasted them (issue 26)."""
    from claimbench.run.census import other_load_now
    from claimbench.stats.precision import BUSY_CPU_FRACTION

    share = other_load_now()
    if share > BUSY_CPU_FRACTION:
        say(f"machine busy now: {share:.0%} of the cores are used by other processes (more than "
            f"{BUSY_CPU_FRACTION:.0%}); CPU numbers measured now will likely end inconclusive (machine busy): "
            "stop that work or run on a quieter machine")


def run_one(claim_path: Path, root: Path, hw: Hardware, opts: RunOptions, listing=None,
            servers=None) -> Outcome:
    """One claim; ``servers`` holds the fork servers of this run (one is made when absent)."""
    if servers is None:
        servers = _shared_servers(root, opts)
    say = opts.progress or (lambda msg: None)
    checked = gate_file(Path(claim_path), root, listing)
    if not checked.ok:
        first = checked.problems[0] if checked.problems else None
        cid = checked.claim.id if checked.claim else Path(claim_path).stem
        return Outcome(cid, Path(claim_path), Status.REJECTED, f"policy: {first}" if first else "policy", hardware=hw.name)
    claim = checked.claim
    assert claim is not None  # checked.ok
    ok, why = matches(claim.hardware, hw)
    if ok and opts.correctness_only:
        ok, why = False, "timing not run: correctness only (the main job times it)"
    if not ok and opts.hardware_only:
        return Outcome(claim.id, Path(claim_path), Status.SKIPPED, why, hardware=hw.name,
                       metric=claim.claimed.metric, claimed_value=claim.claimed.value)
    device = claim.hardware.device if ok else "cpu"
    if ok:
        dtype = claim.precision.dtype
    else:
        dtype = claim.precision.check_dtype or (claim.precision.dtype if claim.precision.dtype in CPU_CHECK_DTYPES else "float32")
    kpath = root / claim.kernel.impl.rpartition(":")[0]
    names = [claim.kernel.backend or backends.infer(kpath), claim.baseline.backend or backends.infer(root / claim.baseline.impl.rpartition(":")[0])]
    seeds = draw_seeds(claim.correctness.trials)
    say(f"{claim.id}: {'measuring on ' + hw.name if ok else 'correctness on CPU (' + why + ')'}")
    with one_claim_at_a_time(root, shared=not ok and _census_blind_to(opts.results, root)):
        return _measure(claim, Path(claim_path), root, hw, opts=opts, servers=servers, ok=ok, why=why, dtype=dtype,
                        device=device, names=names, seeds=seeds, say=say)


def _measure(claim, claim_path: Path, root: Path, hw: Hardware, *, opts: RunOptions, servers, ok: bool, why: str,
             dtype: str, device: str, names: list, seeds: dict, say) -> Outcome:
    """The claim's window, under the project's lock: ceilings, processes, file census, record."""
    ceilings = _ceilings(claim, hw, opts, dtype, servers, say) if ok else None
    stop = _precision_stop(claim, hw, device, dtype, ceilings) if ok else None
    sandbox = servers.sandbox(cuda=device == "cuda")
    run_id = new_run_id()
    log_path = opts.results / ".cache" / "logs" / f"{claim.id}-{run_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    job = Job(claim=claim, root=root, device=device, dtype=dtype, measured=ok, seeds=seeds,
              timing=opts.timing.overrides(), hot=opts.hot, hardware=hw.to_dict(), env=backends.child_env(names, device),
              threads=opts.threads, timeout_s=opts.timeout_s, log_path=log_path,
              max_memory_bytes=opts.max_memory_bytes or default_max_memory())
    watched = [root] + ([opts.results] if not Path(opts.results).resolve().is_relative_to(root.resolve()) else [])
    before = {str(w): filecensus.snapshot(w) for w in watched}
    for w in watched:
        servers.backup(w).refresh(before[str(w)])
    runs = []
    # a multi-rank run is already several processes per side; one launch of them is the default there
    default_repeat = MIN_PROCESSES.get(device, 1) if claim.hardware.count == 1 else 1
    repeat = max(1, opts.repeat or default_repeat) if ok else 1
    for i in range(repeat):
        # every line of a repeated run names its process: "trial 1/3" three times said nothing (issue 26)
        tag = f"{claim.id}: process {i + 1}/{repeat}: " if repeat > 1 else f"{claim.id}: "
        say(f"{tag}starting its processes")

        def progress(msg: str, tag: str = tag) -> None:
            say(f"{tag}{msg}")
        if claim.hardware.count > 1:
            from claimbench.run.launch import Nodes, launch
            nodes = Nodes(claim.hardware.nodes, opts.node_rank, opts.master_addr, opts.master_port)
            run = launch(job, claim.hardware.count, nodes, opts.sandbox, run_id, progress)
        else:
            run = orchestrate(job, servers.get(sandbox, job.env), progress, stop=stop).to_dict()
        runs.append(run)
        if run.get("outcome") or (run.get("correctness") or {}).get("passed") is not True:
            break
    touched = _undo_file_changes(root, watched, before, opts.results, servers)
    if touched:
        runs.append({"outcome": "error", "outcome_reason": "the claim's processes changed files they must not touch: "
                     + ", ".join(touched[:5]) + ("" if len(touched) <= 5 else f" and {len(touched) - 5} more")
                     + " (put back as they were when the run began; each changed version and each new file is "
                     f"kept under {Path(opts.results) / '.quarantine'}, so an edit made meanwhile is not lost)"})
    for res in runs:
        res["ceilings"] = ceilings
        res["sandbox"] = sandbox.kind if sandbox.kind == "bwrap" else f"none: {sandbox.why}"
    rec = build_record(claim, Path(claim_path), root, hw, runs, matched=(ok, why), dtype=dtype, device=device)
    try:
        path = write_record(opts.results, rec)
    except RecordWriteError as e:  # the measurement is finished: keep it, and say where
        raise RecordWriteError(f"{e}; the finished record was {keep_unwritable(rec, near=log_path)}") from None
    from claimbench.store.index import append_index
    append_index(opts.results, path, rec)
    return Outcome(claim.id, Path(claim_path), Status(rec.verdict), rec.reason, path, rec.value, rec.ci_low,
                   rec.ci_high, claim.claimed.metric, claim.claimed.value, hw.name,
                   checked=rec.correctness.get("passed") is True)


_SHARED: dict = {}


def _shared_servers(root: Path, opts: RunOptions):
    """Callers of run_one without a Servers context (the API, tests) share one fork server per
    project and sandbox setting for the life of the process: torch is imported once, not per claim."""
    import atexit

    from claimbench.run.servers import Servers

    key = (str(Path(root).resolve()), opts.sandbox, opts.threads)
    if key not in _SHARED:
        if not _SHARED:
            atexit.register(lambda: [s.__exit__(None, None, None) for s in _SHARED.values()])
        _SHARED[key] = Servers(root, opts).__enter__()
    return _SHARED[key]


def new_run_id() -> str:
    import secrets
    import time as _time
    return _time.strftime("%Y%m%dT%H%M%SZ", _time.gmtime()) + "-" + secrets.token_hex(3)


def _precision_stop(claim, hw: Hardware, device: str, dtype: str, ceilings: Optional[dict]):
    """The stopping rule: rounds go on until the claim's CI is narrow enough (or time runs out)."""
    from claimbench.stats.stopping import PrecisionStop
    params = dict(claim.workload.params)
    flops = expr.evaluate(claim.workload.flops, params) if claim.workload.flops else None
    nbytes = expr.evaluate(claim.workload.bytes, params) if claim.workload.bytes else None
    floor = None
    if ceilings and claim.claimed.metric == "sol_fraction":
        from claimbench.machine.ceilings import Ceilings, floor_us
        floor, _ = floor_us(flops, nbytes, Ceilings.from_dict(ceilings), dtype, cold=device == "cuda",
                            working_set_bytes=float(nbytes or 0), cache_bytes=0.0)
    return PrecisionStop(claim.claimed.metric, device, getattr(claim.claimed, "max_ci_halfwidth", None),
                         flops, nbytes, floor)


def _ceilings(claim, hw: Hardware, opts: RunOptions, dtype: str, servers, say) -> Optional[dict]:
    """Measured (or cached) ceilings, from a process that never imports claim code."""
    from claimbench.machine.ceilings import cache_dir, load_cached
    from claimbench.run.ceilings_process import run_ceilings
    cache = cache_dir(opts.ceilings_cache)
    dtypes = sorted({dtype, "float32"})
    try:
        known = load_cached(cache, hw, tuple(dtypes))
        if known is not None:
            return known.to_dict()
        say(f"{claim.id}: measuring the machine's ceilings for {hw.name}")
        servers.wait_ready()  # its imports must not share the cores with the measurement
        return run_ceilings(hw.to_dict(), dtypes, cache, env_extra={}, progress=lambda m: say(f"{claim.id}: ceilings: {m}"))
    except Exception as e:  # no ceilings, no floor and no sol_fraction: said in the record
        say(f"{claim.id}: {e}")
        return None


def _census_blind_to(results: Path, root: Path) -> bool:
    """Records written under ``results`` are never seen by another claim's file census: the folder
    is under one the census skips (`results/.cache/...`, the test command's). A folder outside the
    project is not: the run watches it too (a claim's process must not plant a record there), so two
    claims writing into it at once each took the other's record for a planted one and moved it to
    the quarantine (found 2026-12-02 with `--claims-results /tmp/...` under pytest-xdist)."""
    res, top = Path(results).resolve(), root.resolve()
    if not res.is_relative_to(top):
        return False
    return any(part in filecensus.SKIP_DIRS for part in res.relative_to(top).parts)


def _undo_file_changes(root: Path, watched: list[Path], before: dict, results: Path, servers) -> list[str]:
    touched: list[str] = []
    for w in watched:
        changed, planted, removed = filecensus.changes(before[str(w)], filecensus.snapshot(w))
        if changed or planted or removed:
            touched += [os.path.relpath(p, root) for p in changed + planted + removed]
            filecensus.undo(w, changed, planted, removed, Path(results) / ".quarantine", servers.backup(w))
    return touched


def _machine_load(results: list[dict], hw: Hardware, device: str) -> dict:
    """Other processes' share of the machine while timed, over every process of the run (weighted
    by their wall time), and the other processes seen on the claim's GPUs."""
    loads = [r["load"] for r in results if r.get("load")]
    wall = sum(x["wall_s"] for x in loads)
    frac = sum(x["other_cpu_fraction"] * x["wall_s"] for x in loads) / wall if wall > 0 else None
    gpus = max((len(g.other_processes) for g in hw.gpus), default=0) if device == "cuda" else None
    return {"other_cpu_fraction": None if frac is None else round(frac, 4), "other_gpu_processes": gpus}


def _host_allocator() -> dict:
    from claimbench.run.servers import HOST_ALLOCATOR_ENV
    return {k: os.environ.get(k, v) for k, v in HOST_ALLOCATOR_ENV.items()}


def _blockers(hw: Hardware, ok: bool, device: str, timing: dict, bracket: Optional[dict] = None) -> tuple:
    """Why this run cannot verify even if its numbers clear the claim."""
    out = list(blockers(hw)) if ok and device == "cuda" else []
    for side in ("kernel", "baseline"):
        unresolved = ((bracket or {}).get("unresolved") or {}).get(side, 0)
        taken = ((bracket or {}).get(side) or {}).get("samples", 0)
        if taken and unresolved > 0.02 * taken:
            out.append(f"the orchestrator's clock could not resolve the {side}'s calls: {unresolved} of {taken} samples "
                       f"were no longer than a null call ({((bracket or {}).get('null_us') or {}).get(side, 0):.0f} us); a "
                       "quieter machine or a larger workload gives it something to measure")
    n = ((timing.get("calls_per_block") or {}).get("kernel") or 1)
    if ok and timing.get("mode") == "cpu" and n > 1:
        out.append(f"kernel calls were timed in blocks of {n} (each under the block time), so not every "
                   "timed output could be checked; make the workload larger")
    return tuple(out)


def _side(results: list[dict], side: str) -> dict:
    out: dict[str, Any] = {"samples_us": [], "rounds": [], "processes": [], "dropped_us": []}
    meds = []
    for i, res in enumerate(results):
        t = ((res.get("timing") or {}).get(side)) or {}
        xs = list(t.get("samples_us") or [])
        out["samples_us"] += xs
        out["rounds"] += list(t.get("rounds") or [0] * len(xs))
        out["processes"] += [i] * len(xs)
        out["dropped_us"] += list(t.get("dropped_us") or [])
        if t.get("median_us") is not None:
            meds.append(t["median_us"])
    if out["samples_us"]:
        import numpy as np
        kept = np.asarray(out["samples_us"])
        out["median_us"] = float(np.median(kept))
        out["iqr_us"] = float(np.percentile(kept, 75) - np.percentile(kept, 25))
    return out


def build_record(claim, claim_path: Path, root: Path, hw: Hardware, results: list[dict], *, matched, dtype, device) -> Record:
    """Everything the child reported plus what only the parent knows, and the verdict on it."""
    ok, why = matched
    last = results[-1]
    outcome = next((r.get("outcome") for r in results if r.get("outcome")), None)
    outcome_reason = next((r.get("outcome_reason", "") for r in results if r.get("outcome")), "")
    if outcome in ("error", "timeout") and not ok:  # fail closed: a CPU check that could not run is an error, never a skip
        outcome_reason = f"{why}; CPU correctness check could not run: {outcome_reason}"
    corr = dict(last.get("correctness") or {})
    corrs = [r.get("correctness") or {} for r in results]
    if corrs and all(c.get("passed") is True for c in corrs):
        corr["passed"] = True
    elif any(c.get("passed") is False for c in corrs):
        corr = next(c for c in corrs if c.get("passed") is False)
    rejections = sorted({x for r in results for x in r.get("rejections", [])})
    params = dict(claim.workload.params)
    flops = expr.evaluate(claim.workload.flops, params) if claim.workload.flops else None
    nbytes = expr.evaluate(claim.workload.bytes, params) if claim.workload.bytes else None
    k, b = _side(results, "kernel"), _side(results, "baseline")
    timing = last.get("timing") or {}
    ceil = last.get("ceilings") or {}
    floor, term = None, ""
    tensor_bytes = last.get("tensor_bytes")
    if ceil and ok:
        from claimbench.machine.ceilings import Ceilings, floor_us
        cache = (hw.gpus[0].l2_bytes if hw.gpus else 0) if device == "cuda" else (hw.cpu.llc_bytes or 0)
        floor, term = floor_us(flops, nbytes, Ceilings.from_dict(ceil), dtype, cold=timing.get("mode") == "cold",
                               working_set_bytes=float(tensor_bytes or 0), cache_bytes=float(cache or 0))
    throttled = any(bool((r.get("timing") or {}).get("throttled_majority")) for r in results)
    load = _machine_load(results, hw, device)
    ev = Evidence(
        metric=claim.claimed.metric, claimed_value=claim.claimed.value, tolerance=claim.claimed.tolerance,
        flops=flops, bytes=nbytes, outcome=outcome, outcome_reason=outcome_reason, rejections=tuple(rejections),
        correctness_passed=corr.get("passed"), correctness_reason=corr.get("reason", ""),
        hardware_match=ok, hardware_reason=why, blockers=_blockers(hw, ok, device, timing, last.get("bracket")),
        kernel=Samples(k["samples_us"], k["rounds"], k["processes"]) if k["samples_us"] else None,
        baseline=Samples(b["samples_us"], b["rounds"], b["processes"]) if b["samples_us"] else None,
        floor_us=floor, floor_term=term, throttled_majority=throttled, tensor_bytes=tensor_bytes,
        **evidence_fields(PROTOCOL_VERSION, {"device": device, "machine_load": load}, {}, claim.claimed.model_dump()))
    v = decide(ev)
    sources = {p for p in claim_sources(root, claim)}
    sources |= {(root / rel).resolve() for r in results for rel in (r.get("sources") or [])}
    kernels_dir = (root / "kernels").resolve()
    hashes = {str(p.relative_to(root.resolve())): sha256_file(p) for p in sorted(sources)
              if p.is_file() and p.is_relative_to(kernels_dir)}
    protocol = {key: timing.get(key) for key in ("mode", "timer", "warmup_s", "warmup_calls", "stop_reason", "flush_bytes",
                                                 "l2_reset", "calls_per_block", "n_rounds", "elapsed_s", "config")}
    protocol.update(device=device, dtype=dtype, repeat=len(results), timed_checks=last.get("timed_checks"),
                    dropped_throttled={s: ((last.get("timing") or {}).get(s) or {}).get("dropped_throttled", 0) for s in ("kernel", "baseline")},
                    autotune=last.get("autotune"), torch_threads=last.get("torch_threads"), topology=last.get("topology"),
                    host_allocator=last.get("host_allocator") or _host_allocator(),
                    sandbox=last.get("sandbox"), bracket=last.get("bracket"), machine_load=load,
                    census=last.get("census"), output_read=last.get("output_read"),
                    side_versions=last.get("versions"))
    seeds = last.get("seeds") or {}
    return Record(
        claim_id=claim.id, created_utc=utc_now(), harness_version=__version__,
        git_commit=hw.software.git_commit, git_dirty=hw.software.git_dirty,
        claim_sha256=sha256_file(claim_path), claim_path=str(claim_path.resolve().relative_to(root.resolve())) if claim_path.resolve().is_relative_to(root.resolve()) else str(claim_path),
        source_sha256=hashes, seeds=[*seeds.get("trials", []), *seeds.get("sensitivity", []), seeds.get("timing", 0)],
        hardware={**hw.to_dict(), "slug": hw.slug, "name": hw.name}, hardware_match=ok, hardware_reason=why,
        blockers=list(ev.blockers), mode=("measured-hot" if timing.get("mode") == "hot" else "measured") if ok else "correctness-only",
        **claim_copy(claim), flops=flops, bytes=nbytes,
        tensor_bytes=tensor_bytes, protocol=protocol, correctness=corr, rejections=rejections,
        outcome=outcome, outcome_reason=outcome_reason, throttled_majority=throttled,
        kernel=SideTiming.model_validate(k), baseline=SideTiming.model_validate(b),
        ceilings=ceil, floor_us=floor, floor_term=term, verdict=v.status.value, reason=v.reason,
        value=v.value, ci_low=v.ci_low, ci_high=v.ci_high, published_value=v.published_value)
