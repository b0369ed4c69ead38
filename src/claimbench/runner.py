"""The runner: for a list of claims, start the fork server, detect, select; then per claim check the
policy, match the hardware, run it in child processes, decide and record. One claim at a time.

The fork server starts first, before detection, because its torch import takes seconds and needs
nothing detection finds; the policy check runs per claim, after detection, so that a claim is
rejected or skipped with the machine named. The parent never imports a kernel: the orchestrator's
typed `ClaimRun`s and what the parent knows become the record in `orchestrator/assemble.py`, whose verdict
is the same pure function ``audit`` recomputes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

from claimbench.gate.policy import gate_file
from claimbench.machine import backends
from claimbench.machine.hardware import Hardware, matches
from claimbench.options import RunOptions
from claimbench.orchestrator import filecensus
from claimbench.orchestrator.assemble import RunContext, assemble_record
from claimbench.orchestrator.cachecheck import shared_cache_blocker
from claimbench.orchestrator.job import ClaimRun, Job
from claimbench.orchestrator.lock import one_claim_at_a_time
from claimbench.orchestrator.orchestrate import orchestrate
from claimbench.orchestrator.sandbox import choose, default_max_memory
from claimbench.orchestrator.seeds import draw_seeds
from claimbench.spec import cost, expr
from claimbench.spec.claim import Claim
from claimbench.stats.precision import MIN_PROCESSES
from claimbench.stats.status import Status
from claimbench.store.record import (
    RecordWriteError,
    SweepPoint,
    check_writable,
    keep_unwritable,
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
    point: str = ""  # a sweep point's `axis=value`; "" for the claim's own params, whose outcome is the claim's
    points: tuple["Outcome", ...] = ()  # the claim's other sweep points, measured after it (never its verdict)


def run_claims(paths: list[Path], root: Path, opts: RunOptions, *, hw: Optional[Hardware] = None,
               select: Optional[Callable[[list[Path], Hardware], list[Path]]] = None) -> tuple[Hardware, list[Outcome]]:
    """Detect, then run each claim. The first claim's process starts before anything else, so
    its torch import overlaps detection and checking; ``select`` may narrow the claims once the
    hardware is known."""
    from claimbench.machine.detect import detect
    from claimbench.orchestrator.servers import Servers
    from claimbench.spec.project import load_listing

    outcomes = []
    if paths:
        from claimbench.store.provenance import refuse_tracked_links
        refuse_tracked_links(root, opts.results, "run")  # records, logs and caches go there
        check_writable(opts.results)  # one line now, not a lost measurement later
        swept = filecensus.sweep_backups()
        if swept and opts.progress:
            opts.progress(f"removed {len(swept)} backup folder(s) left by killed runs: "
                          + ", ".join(str(p) for p in swept[:3]) + (" ..." if len(swept) > 3 else ""))
    with Servers(root, opts) as servers:
        hw = hw or detect(root)  # about 0.06 s without a GPU
        paths = select(paths, hw) if select else paths
        listing = load_listing(root)
        if paths:  # its torch import overlaps the checks and the first claim's start
            servers.start_early(_first_env(paths[0], root, hw=hw, opts=opts, listing=listing))
        opts.progress and opts.progress(f"hardware: {hw.name} ({hw.device}); {len(paths)} claim(s)")
        if paths and opts.progress and hw.device == "cpu" and not opts.correctness_only:
            _say_if_busy(opts.progress)
        for p in paths:
            outcomes.append(run_one(p, root, hw, opts=opts, listing=listing, servers=servers))
    return hw, outcomes


def _say_if_busy(say: Callable[[str], None]) -> None:
    """One line at the start when the machine is already busy: a CPU number measured now ends
    `inconclusive` ("machine busy"), and saying so after minutes of rounds wasted them (issue 26)."""
    from claimbench.orchestrator.census import other_load_now
    from claimbench.stats.precision import BUSY_CPU_FRACTION

    share = other_load_now()
    if share > BUSY_CPU_FRACTION:
        say(f"machine busy now: {share:.0%} of the cores are used by other processes (more than "
            f"{BUSY_CPU_FRACTION:.0%}); CPU numbers measured now will likely end inconclusive (machine busy): "
            "stop that work or run on a quieter machine")


def _placement(claim: Claim, root: Path, *, hw: Hardware, opts: RunOptions) -> tuple[bool, str, str, list[str]]:
    """(measured here, why not, the device its sides run on, its two sides' backends)."""
    ok, why = matches(claim.hardware, hw)
    if ok and opts.correctness_only:
        ok, why = False, "timing not run: correctness only (the main job times it)"
    names = [claim.kernel.backend or backends.infer(root / claim.kernel.impl.rpartition(":")[0]),
             claim.baseline.backend or backends.infer(root / claim.baseline.impl.rpartition(":")[0])]
    return ok, why, claim.hardware.device if ok else "cpu", names


def _first_env(claim_path: Path, root: Path, *, hw: Hardware, opts: RunOptions, listing) -> dict:
    """The sides' environment of the first claim, so the early fork server is one it will use: a Triton
    claim checked on CPU needs an interpreted one, and an unused server cost a torch import (about 20%
    of such a claim's `run --timing off`, measured with py-spy). When the claim does not pass its
    checks (run_one says why), the machine's own device's: what most claims after it will need."""
    checked = gate_file(Path(claim_path), root, listing)
    if not checked.ok or checked.claim is None:
        return backends.child_env([], hw.device)
    _, _, device, names = _placement(checked.claim, root, hw=hw, opts=opts)
    return backends.child_env(names, device)


def run_one(claim_path: Path, root: Path, hw: Hardware, *, opts: RunOptions, listing=None,
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
    ok, why, device, names = _placement(claim, root, hw=hw, opts=opts)
    if not ok and opts.hardware_only:
        return Outcome(claim.id, Path(claim_path), Status.SKIPPED, why, hardware=hw.name,
                       metric=claim.claimed.metric, claimed_value=claim.claimed.value)
    if ok:
        dtype = claim.precision.dtype
    else:
        dtype = claim.precision.check_dtype or (claim.precision.dtype if claim.precision.dtype in CPU_CHECK_DTYPES else "float32")
    seeds = draw_seeds(claim.correctness.trials)
    say(f"{claim.id}: {'measuring on ' + hw.name if ok else 'correctness on CPU (' + why + ')'}")
    with one_claim_at_a_time(root, shared=not ok and _census_blind_to(opts.results, root)):
        def measure(point: Optional[SweepPoint]) -> Outcome:
            return _measure(claim, Path(claim_path), root, hw=hw, opts=opts, servers=servers, ok=ok, why=why,
                            dtype=dtype, device=device, names=names, seeds=seeds, say=say, point=point)
        own = measure(None)
        if not (ok and opts.sweep and claim.workload.sweep):
            return own
        (axis,) = claim.workload.sweep
        if not own.checked or own.status in (Status.ERROR, Status.TIMEOUT, Status.REJECTED):
            say(f"{claim.id}: sweep not measured: its own point ended {own.status.value}")
            return own
        # the claim's own point first: its verdict is the claim's, and a point after it cannot change it
        return replace(own, points=tuple(measure(SweepPoint(axis=axis, value=v)) for v in claim.workload.off_points()))


def _measure(claim: Claim, claim_path: Path, root: Path, *, hw: Hardware, opts: RunOptions, servers, ok: bool,
             why: str, dtype: str, device: str, names: list[str], seeds: dict, say: Callable[[str], None],
             point: Optional[SweepPoint] = None) -> Outcome:
    """The claim's window, under the project's lock: ceilings, processes, file census, record. At a
    sweep ``point`` the processes run the claim with that axis's value; the record copies the claim
    as it is and says which point it measured."""
    record_claim = claim
    if point is not None:
        claim = claim.model_copy(update={"workload": claim.workload.at(point.value)})
        say = _tagged(say, f"{claim.id} at {point.label}: ", f"{claim.id}: ")
    ceilings = _ceilings(claim, hw, opts, dtype=dtype, servers=servers, say=say) if ok else None
    stop = _precision_stop(claim, hw, device, dtype=dtype, ceilings=ceilings) if ok else None
    sandbox = servers.sandbox(cuda=device == "cuda")
    run_id = new_run_id()
    log_path = opts.results / ".cache" / "logs" / f"{claim.id}-{run_id}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    job = Job(claim=claim, root=root, device=device, dtype=dtype, measured=ok, seeds=seeds,
              timing=opts.timing.overrides(), hot=opts.hot, hardware=hw.to_dict(), env=backends.child_env(names, device),
              threads=opts.threads, timeout_s=_time_limit(claim, root, opts, measured=ok, device=device, say=say),
              log_path=log_path,
              max_memory_bytes=opts.max_memory_bytes or default_max_memory())
    watched = [root] + ([opts.results] if not Path(opts.results).resolve().is_relative_to(root.resolve()) else [])
    before = {str(w): filecensus.snapshot(w) for w in watched}
    for w in watched:
        servers.backup(w).refresh(before[str(w)])
    runs: list[ClaimRun] = []
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
            from claimbench.orchestrator.launch import Nodes, launch
            nodes = Nodes(claim.hardware.nodes, opts.node_rank, opts.master_addr, opts.master_port)
            one = launch(job, claim.hardware.count, nodes, sandbox=opts.sandbox, run_id=run_id, say=progress)
        else:
            one = orchestrate(job, servers.get(sandbox, job.env), progress, stop=stop)
        runs.append(one)
        if not one.passed:
            break
    # the ranks' sides run in the sandbox each rank chooses the same way, on this machine (orchestrator/ranks.py)
    ranked = choose(opts.sandbox, cuda=device == "cuda", network=True) if claim.hardware.count > 1 else sandbox
    if sandbox.confines_writes and ranked.confines_writes:
        # its processes could not write here: what changed is somebody else's, and stays (issue 25). A claim
        # of several ranks was held to the unconfined rule, so the shipped two-rank claims, checked as test
        # items in a checkout, put back every edit made there meanwhile (seen 2026-12-06)
        touched, _ = [], _others_changes(root, watched, before, say=say)
    else:
        touched = _undo_file_changes(root, watched, before, results=opts.results, servers=servers)
    touched_reason = ("the claim's processes changed files they must not touch: " + ", ".join(touched[:5])
                      + ("" if len(touched) <= 5 else f" and {len(touched) - 5} more")
                      + " (put back as they were when the run began; each changed version and each new file is "
                      f"kept under {Path(opts.results) / '.quarantine'}, so an edit made meanwhile is not lost)"
                      ) if touched else ""
    ctx = RunContext(claim=record_claim, claim_path=Path(claim_path), root=root, hw=hw, matched=ok, why=why,
                     dtype=dtype, device=device, ceilings=ceilings, touched=touched_reason,
                     sandbox=sandbox.kind if sandbox.kind != "none" else f"none: {sandbox.why}", point=point,
                     shared_caches=shared_cache_blocker(ranked.kind, root, claim, device=device) if ok else "")
    rec = assemble_record(ctx, runs)
    try:
        path = write_record(opts.results, rec)
    except RecordWriteError as e:  # the measurement is finished: keep it, and say where
        raise RecordWriteError(f"{e}; the finished record was {keep_unwritable(rec, near=log_path)}") from None
    from claimbench.store.index import append_index
    append_index(opts.results, path, rec)
    return Outcome(claim.id, Path(claim_path), Status(rec.verdict), rec.reason, path, rec.value, rec.ci_low,
                   rec.ci_high, claim.claimed.metric, claim.claimed.value, hw.name,
                   checked=rec.correctness.get("passed") is True, point=point.label if point else "")


def _tagged(say: Callable[[str], None], tag: str, old: str) -> Callable[[str], None]:
    """``say`` with each line's claim tag naming the sweep point: two points' lines otherwise read alike."""
    def tagged(msg: str) -> None:
        say(tag + msg.removeprefix(old))
    return tagged


_SHARED: dict = {}


def _shared_servers(root: Path, opts: RunOptions):
    """Callers of run_one without a Servers context (the API, tests) share fork servers for the life
    of the process, across projects where the sandbox allows (servers.py `_POOL`): torch is imported
    once, not per claim or per project. The backups stay per project."""
    import atexit

    from claimbench.orchestrator.servers import Servers

    key = (str(Path(root).resolve()), opts.sandbox, opts.threads)
    if key not in _SHARED:
        if not _SHARED:
            atexit.register(lambda: [s.__exit__(None, None, None) for s in _SHARED.values()])
        _SHARED[key] = Servers(root, opts, pooled=True).__enter__()
    return _SHARED[key]


def new_run_id() -> str:
    import secrets
    import time as _time
    return _time.strftime("%Y%m%dT%H%M%SZ", _time.gmtime()) + "-" + secrets.token_hex(3)


def _time_limit(claim: Claim, root: Path, opts: RunOptions, *, measured: bool, device: str, say) -> float:
    """Each process's limit: `--timeout-s` when given, else from the claim's estimated cost (issue 23)."""
    if opts.timeout_s is not None:
        return opts.timeout_s
    if not measured:
        return cost.OFF_HARDWARE_LIMIT_S
    from claimbench.orchestrator.protocol import TimingConfig

    cfg = TimingConfig.for_device(device, **opts.timing.overrides())
    est = cost.estimate(claim, root, max_time_s=cfg.max_time_s, warmup_s=cfg.warmup_s)
    limit = cost.time_limit_s(est)
    say(f"{claim.id}: time limit {limit:g} s a process, from its estimated {est.total_s:.0f} s (start "
        f"{est.startup_s:g}, verification {est.verification_s:g}, timing {est.timing_s:g}; --timeout-s sets it)")
    return limit


def _precision_stop(claim, hw: Hardware, device: str, *, dtype: str, ceilings: Optional[dict]):
    """The stopping rule: rounds go on until the claim's CI is narrow enough (or time runs out)."""
    from claimbench.stats.stopping import PrecisionStop
    flops, nbytes = expr.workload_counts(claim.workload)
    floor = None
    if ceilings and claim.claimed.metric == "sol_fraction":
        from claimbench.machine.ceilings import Ceilings, floor_us
        floor, _ = floor_us(flops, nbytes, Ceilings.from_dict(ceilings), dtype=dtype, cold=device == "cuda",
                            working_set_bytes=float(nbytes or 0), cache_bytes=0.0)
    return PrecisionStop(claim.claimed.metric, device, getattr(claim.claimed, "max_ci_halfwidth", None),
                         flops, nbytes, floor)


def _ceilings(claim, hw: Hardware, opts: RunOptions, *, dtype: str, servers, say) -> Optional[dict]:
    """Measured (or cached) ceilings, from a process that never imports claim code."""
    from claimbench.machine.ceilings import cache_dir, load_cached
    from claimbench.orchestrator.ceilings_process import run_ceilings
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


def _others_changes(root: Path, watched: list[Path], before: dict, *, say: Callable[[str], None]) -> list[str]:
    """What changed under the watched folders while a confined claim ran: not its doing, so left as
    it is and only said (an editor's save, an ingest or publish in another shell)."""
    seen: list[str] = []
    for w in watched:
        changed, planted, removed = filecensus.changes(before[str(w)], filecensus.snapshot(w))
        seen += [os.path.relpath(p, root) for p in changed + planted + removed]
    if seen:
        say(f"{len(seen)} file(s) changed during the run by another process, left as they are: "
            + ", ".join(seen[:5]) + (" ..." if len(seen) > 5 else ""))
    return seen


def _undo_file_changes(root: Path, watched: list[Path], before: dict, *, results: Path, servers) -> list[str]:
    touched: list[str] = []
    for w in watched:
        changed, planted, removed = filecensus.changes(before[str(w)], filecensus.snapshot(w))
        if changed or planted or removed:
            touched += [os.path.relpath(p, root) for p in changed + planted + removed]
            filecensus.undo(w, changed, planted, removed=removed, quarantine=Path(results) / ".quarantine", backup=servers.backup(w))
    return touched
