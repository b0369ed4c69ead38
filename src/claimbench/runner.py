"""The runner: check, detect, match, execute in a child, decide, record. One claim at a time.

The parent never imports a kernel. It decides the verdict from the child's plain data with the
same pure function ``audit`` uses, then writes the record itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from . import __version__, backends, expr
from .hardware import Hardware, blockers, matches
from .policy import check_file
from .record import Record, claim_copy, sha256_file, utc_now, write_record
from .seeds import draw_seeds
from .srcgraph import claim_sources
from .status import Status
from .verdict import Evidence, Samples, decide

CPU_CHECK_DTYPES = ("float64", "float32", "float16", "int64", "int32", "int8", "uint8")  # what CPU torch computes


@dataclass(frozen=True)
class RunOptions:
    results: Path
    timeout_s: float = 900.0
    repeat: int = 1
    hot: bool = False
    hardware_only: bool = False
    progress: Optional[Callable[[str], None]] = None
    timing: dict = field(default_factory=dict)
    ceilings_cache: Optional[Path] = None
    threads: Optional[int] = None  # CPU threads for the child (torch and OpenMP); None: all cores


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


def run_claims(paths: list[Path], root: Path, opts: RunOptions, hw: Optional[Hardware] = None,
               select: Optional[Callable[[list[Path], Hardware], list[Path]]] = None) -> tuple[Hardware, list[Outcome]]:
    """Detect, then run each claim. The first claim's process starts before anything else, so
    its torch import overlaps detection and checking; ``select`` may narrow the claims once the
    hardware is known."""
    from .detect import detect
    from .execute import ClaimProcess
    from .project import load_listing

    early = ClaimProcess(root, _thread_env(opts)) if paths else None
    outcomes = []
    try:
        hw = hw or detect(root)
        paths = select(paths, hw) if select else paths
        listing = load_listing(root)
        opts.progress and opts.progress(f"hardware: {hw.name} ({hw.device}); {len(paths)} claim(s)")
        for p in paths:
            outcomes.append(run_one(p, root, hw, opts, listing=listing, started=early))
            if early is not None and not early.used:
                early.discard()
            early = None
    finally:
        if early is not None and not early.used:
            early.discard()
    return hw, outcomes


def _thread_env(opts: RunOptions) -> dict:
    return {"OMP_NUM_THREADS": str(opts.threads)} if opts.threads else {}


def run_one(claim_path: Path, root: Path, hw: Hardware, opts: RunOptions, listing=None,
            started=None) -> Outcome:
    """One claim; ``started``, a ClaimProcess begun before the claim was known, runs it."""
    say = opts.progress or (lambda msg: None)
    checked = check_file(Path(claim_path), root, listing)
    if not checked.ok:
        first = checked.problems[0] if checked.problems else None
        cid = checked.claim.id if checked.claim else Path(claim_path).stem
        return Outcome(cid, Path(claim_path), Status.REJECTED, f"policy: {first}" if first else "policy", hardware=hw.name)
    claim = checked.claim
    ok, why = matches(claim.hardware, hw)
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
    job = {"root": str(root), "claim": claim.model_dump(mode="json"), "device": device, "dtype": dtype,
           "mode": "measured" if ok else "correctness-only", "seeds": seeds, "hardware": hw.to_dict(),
           "timing": {**opts.timing, "hot": opts.hot or None},
           "log_path": str(opts.results / ".cache" / "logs" / f"{claim.id}.log")}
    say(f"{claim.id}: {'measuring on ' + hw.name if ok else 'correctness on CPU (' + why + ')'}")
    if ok:
        say(f"{claim.id}: ceilings for {hw.name}")
    ceilings = None
    if ok:
        from .ceilings import load_cached
        from .execute import run_ceilings
        cache = opts.ceilings_cache or (opts.results / ".cache")
        dtypes = sorted({dtype, "float32"})
        try:
            known = load_cached(cache, hw, tuple(dtypes))
            if known is None and started is not None:
                started.wait_ready()  # its imports must not share the cores with the measurement
            ceilings = known.to_dict() if known is not None else run_ceilings(hw.to_dict(), dtypes, cache, env_extra={})
        except Exception as e:  # no ceilings, no floor and no sol_fraction: said in the record
            say(f"{claim.id}: {e}")
    say(f"{claim.id}: starting the claim's process")
    records_before = _tree_state(opts.results / "records")
    results = []
    for i in range(max(1, opts.repeat) if ok else 1):
        if claim.hardware.count > 1:
            from .distributed import run_distributed
            if started is not None and not started.used:
                started.discard()  # ranks are separate processes
            res = run_distributed(job, claim.hardware.count, opts.timeout_s,
                                  progress=lambda m: say(f"{claim.id}: {m}"), env_extra=backends.child_env(names, device))
        else:
            from .execute import run_child
            env = {**backends.child_env(names, device), **_thread_env(opts)}
            res = run_child(job, env_extra=env, timeout_s=opts.timeout_s, cwd=root,
                            progress=lambda m: say(f"{claim.id}: {m}"), started=started if i == 0 else None)
        results.append(res)
        if res.get("outcome") or (res.get("correctness") or {}).get("passed") is not True:
            break
    if _tree_state(opts.results / "records") != records_before:
        results.append({"outcome": "error", "outcome_reason": "the claim's process wrote into the results folder; only the parent writes records"})
    for res in results:
        res["ceilings"] = ceilings
    rec = build_record(claim, Path(claim_path), root, hw, results, matched=(ok, why), dtype=dtype, device=device)
    path = write_record(opts.results, rec)
    try:
        from .index import append_index
        append_index(opts.results, path, rec)
    except ImportError:
        pass
    return Outcome(claim.id, Path(claim_path), Status(rec.verdict), rec.reason, path, rec.value, rec.ci_low,
                   rec.ci_high, claim.claimed.metric, claim.claimed.value, hw.name)


def _tree_state(folder: Path) -> dict:
    """Folder modification times under results/records: a new or removed record shows here."""
    if not folder.is_dir():
        return {}
    state = {str(folder): folder.stat().st_mtime_ns}
    with os.scandir(folder) as it:
        for e in it:
            if e.is_dir(follow_symlinks=False):
                state[e.path] = e.stat(follow_symlinks=False).st_mtime_ns
    return state


def _blockers(hw: Hardware, ok: bool, device: str, timing: dict) -> tuple:
    """Why this run cannot verify even if its numbers clear the claim."""
    out = list(blockers(hw)) if ok and device == "cuda" else []
    n = ((timing.get("calls_per_block") or {}).get("kernel") or 1)
    if ok and timing.get("mode") == "cpu" and n > 1:
        out.append(f"kernel calls were timed in blocks of {n} (each under the block time), so not every "
                   "timed output could be checked; make the workload larger")
    return tuple(out)


def _side(results: list[dict], side: str) -> dict:
    out = {"samples_us": [], "rounds": [], "processes": [], "dropped_us": []}
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
        xs = np.asarray(out["samples_us"])
        out["median_us"] = float(np.median(xs))
        out["iqr_us"] = float(np.percentile(xs, 75) - np.percentile(xs, 25))
    return out


def build_record(claim, claim_path: Path, root: Path, hw: Hardware, results: list[dict], *, matched, dtype, device) -> Record:
    """Everything the child reported plus what only the parent knows, and the verdict on it."""
    ok, why = matched
    last = results[-1]
    outcome = next((r.get("outcome") for r in results if r.get("outcome")), None)
    outcome_reason = next((r.get("outcome_reason", "") for r in results if r.get("outcome")), "")
    if outcome == "error" and not ok:  # the CPU path of a GPU kernel may not exist: no verdict from that
        outcome, outcome_reason = None, ""
        last = {"correctness": {"passed": None, "reason": f"CPU correctness check could not run: {results[-1].get('outcome_reason', '')}"}}
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
        from .ceilings import Ceilings, floor_us
        cache = (hw.gpus[0].l2_bytes if hw.gpus else 0) if device == "cuda" else (hw.cpu.llc_bytes or 0)
        floor, term = floor_us(flops, nbytes, Ceilings.from_dict(ceil), dtype, cold=timing.get("mode") == "cold",
                               working_set_bytes=float(tensor_bytes or 0), cache_bytes=float(cache or 0))
    throttled = any(bool((r.get("timing") or {}).get("throttled_majority")) for r in results)
    ev = Evidence(
        metric=claim.claimed.metric, claimed_value=claim.claimed.value, tolerance=claim.claimed.tolerance,
        flops=flops, bytes=nbytes, outcome=outcome, outcome_reason=outcome_reason, rejections=tuple(rejections),
        correctness_passed=corr.get("passed"), correctness_reason=corr.get("reason", ""),
        hardware_match=ok, hardware_reason=why, blockers=_blockers(hw, ok, device, timing),
        kernel=Samples(k["samples_us"], k["rounds"], k["processes"]) if k["samples_us"] else None,
        baseline=Samples(b["samples_us"], b["rounds"], b["processes"]) if b["samples_us"] else None,
        floor_us=floor, floor_term=term, throttled_majority=throttled, tensor_bytes=tensor_bytes)
    v = decide(ev)
    sources = {p for p in claim_sources(root, claim)}
    sources |= {(root / rel).resolve() for r in results for rel in r.get("loaded_sources", [])}
    kernels_dir = (root / "kernels").resolve()
    hashes = {str(p.relative_to(root.resolve())): sha256_file(p) for p in sorted(sources)
              if p.is_file() and p.is_relative_to(kernels_dir)}
    protocol = {key: timing.get(key) for key in ("mode", "timer", "warmup_s", "warmup_calls", "stop_reason", "flush_bytes",
                                                 "l2_reset", "calls_per_block", "n_rounds", "elapsed_s", "config")}
    protocol.update(device=device, dtype=dtype, repeat=len(results), timed_checks=last.get("timed_checks"),
                    dropped_throttled={s: ((last.get("timing") or {}).get(s) or {}).get("dropped_throttled", 0) for s in ("kernel", "baseline")},
                    autotune=last.get("autotune"), torch_threads=last.get("torch_threads"), topology=last.get("topology"),
                    host_allocator=last.get("host_allocator"))
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
        outcome=outcome, outcome_reason=outcome_reason, kernel=k, baseline=b, throttled_majority=throttled,
        ceilings=ceil, floor_us=floor, floor_term=term, verdict=v.status.value, reason=v.reason,
        value=v.value, ci_low=v.ci_low, ci_high=v.ci_high, published_value=v.published_value)
