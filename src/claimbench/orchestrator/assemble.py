"""A claim's record, assembled from the typed runs the orchestrator returned and what only the parent knows.

The orchestrator (or the rank launcher) returns one `ClaimRun` per process of a `--repeat`; the
runner adds what it found around them (the ceilings, the sandbox, the files the claim's processes
changed) as a `RunContext`, never by writing keys into the runs or adding a run that did not happen. The verdict is the same pure
`stats.verdict.decide` that `audit` recomputes from the record, so what the record says is what
was decided.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Optional, Sequence

from claimbench import __version__
from claimbench.gate.srcgraph import claim_sources
from claimbench.machine.hardware import Hardware, blockers
from claimbench.orchestrator import interrupts, runwait, untimed
from claimbench.orchestrator.job import BracketSummary, ClaimRun, Correctness
from claimbench.orchestrator.protocol import PairTiming
from claimbench.orchestrator.timed import RESOLUTION
from claimbench.spec import expr
from claimbench.spec.claim import Claim
from claimbench.stats.precision import evidence_fields
from claimbench.stats.verdict import Evidence, Samples, decide
from claimbench.store.claimcopy import claim_copy
from claimbench.store.record import (
    PROTOCOL_VERSION,
    Record,
    SideTiming,
    SweepPoint,
    sha256_file,
    utc_now,
)

SIDES = ("kernel", "baseline")
PROTOCOL_KEYS = ("mode", "timer", "warmup_s", "warmup_calls", "stop_reason", "flush_bytes", "l2_reset",
                 "calls_per_block", "n_rounds", "elapsed_s", "config")  # copied from the last run's timing


@dataclass(frozen=True)
class RunContext:
    """What the parent knows about a claim's runs that the runs themselves do not say."""

    claim: Claim
    claim_path: Path
    root: Path
    hw: Hardware
    matched: bool                   # the hardware matched: measured, not a CPU correctness check
    why: str                        # the hardware match's reason
    dtype: str
    device: str
    ceilings: Optional[dict] = None  # `Ceilings.to_dict()`, or None when none were measured
    sandbox: str = ""               # "bwrap", or "none: <why>"
    touched: str = ""               # why the run is an error for files the claim's processes changed; "" if none
    shared_caches: str = ""         # why its sides could edit each other's compiled code (`cachecheck`); "" if not
    point: Optional[SweepPoint] = None  # the sweep point run (its axis at another value); None: the claim's params


def assemble_record(ctx: RunContext, runs: Sequence[ClaimRun]) -> Record:
    """Every run's evidence, combined (samples of every process; the first failure, the last timing),
    with the verdict on it."""
    claim, hw, ok = ctx.claim, ctx.hw, ctx.matched
    last = runs[-1]
    failed = next((r for r in runs if r.outcome), None)
    outcome = failed.outcome if failed else ("error" if ctx.touched else None)
    outcome_reason = failed.outcome_reason if failed else ctx.touched
    if outcome in ("error", "timeout") and not ok:  # fail closed: a CPU check that could not run is an error, never a skip
        outcome_reason = f"{ctx.why}; CPU correctness check could not run: {outcome_reason}"
    corr = _correctness(runs)
    rejections = sorted({x for r in runs for x in r.rejections})
    flops, nbytes = expr.workload_counts(claim.workload, {ctx.point.axis: ctx.point.value} if ctx.point else None)
    k, b = _side(runs, "kernel"), _side(runs, "baseline")
    timing = last.timing
    mode = timing.mode if timing else None
    floor, term = _floor(ctx, flops, nbytes, tensor_bytes=last.tensor_bytes, cold=mode == "cold")
    throttled = any(r.timing is not None and r.timing.throttled_majority for r in runs)
    load = _machine_load(runs, hw, ctx.device)
    ev = Evidence(
        metric=claim.claimed.metric, claimed_value=claim.claimed.value, tolerance=claim.claimed.tolerance,
        flops=flops, bytes=nbytes, outcome=outcome, outcome_reason=outcome_reason, rejections=tuple(rejections),
        correctness_passed=corr.passed, correctness_reason=corr.reason,
        hardware_match=ok, hardware_reason=ctx.why, blockers=_blockers(hw, ok, ctx.device, runs=runs) + (_unchecked(runs) if ok else ())
        + (_interference(runs) if ok and ctx.device == "cpu" else ())
        + ((ctx.shared_caches,) if ok and ctx.shared_caches else ()),
        kernel=Samples(k.samples_us, k.rounds, k.processes) if k.samples_us else None,
        baseline=Samples(b.samples_us, b.rounds, b.processes) if b.samples_us else None,
        floor_us=floor, floor_term=term, throttled_majority=throttled, tensor_bytes=last.tensor_bytes,
        **evidence_fields(PROTOCOL_VERSION, {"device": ctx.device, "machine_load": load}, {}, claimed=claim.claimed.model_dump()))
    v = decide(ev)
    protocol: dict[str, Any] = {key: getattr(timing, key) if timing else None for key in PROTOCOL_KEYS}
    protocol.update(device=ctx.device, dtype=ctx.dtype, repeat=len(runs),
                    timed_checks=last.timed_checks.as_record() if last.timed_checks else None,
                    dropped_throttled={s: getattr(timing, s).dropped_throttled if timing else 0 for s in SIDES},
                    autotune=last.autotune, torch_threads=last.torch_threads, topology=last.topology,
                    host_allocator=_host_allocator(), sandbox=ctx.sandbox,
                    bracket=last.bracket.as_record() if last.bracket else None, machine_load=load,
                    census=last.census, output_read=last.output_read, side_versions=last.versions,
                    # where the claim's time went, over its processes: what its next budget is estimated from
                    startup_s=round(sum(r.startup_s for r in runs), 2),
                    verification_s=round(sum(r.verification_s for r in runs), 2),
                    timing_s=round(sum(r.timing_s for r in runs), 2))
    seeds = last.seeds or {}
    root = ctx.root.resolve()
    path = ctx.claim_path.resolve()
    return Record(
        claim_id=claim.id, created_utc=utc_now(), harness_version=__version__,
        git_commit=hw.software.git_commit, git_dirty=hw.software.git_dirty,
        claim_sha256=sha256_file(ctx.claim_path),
        claim_path=str(path.relative_to(root)) if path.is_relative_to(root) else str(ctx.claim_path),
        source_sha256=_source_hashes(ctx, runs),
        seeds=[*seeds.get("trials", []), *seeds.get("sensitivity", []), seeds.get("timing", 0)],
        hardware={**hw.to_dict(), "slug": hw.slug, "name": hw.name}, hardware_match=ok, hardware_reason=ctx.why,
        blockers=list(ev.blockers),
        mode=("measured-hot" if mode == "hot" else "measured") if ok else "correctness-only",
        **claim_copy(claim), sweep_point=ctx.point, flops=flops, bytes=nbytes,
        tensor_bytes=last.tensor_bytes, protocol=protocol, correctness=corr.as_record(), rejections=rejections,
        outcome=outcome, outcome_reason=outcome_reason, throttled_majority=throttled,
        kernel=k, baseline=b, ceilings=ctx.ceilings or {}, floor_us=floor, floor_term=term,
        verdict=v.status.value, reason=v.reason, value=v.value, ci_low=v.ci_low, ci_high=v.ci_high,
        published_value=v.published_value)


def _correctness(runs: Sequence[ClaimRun]) -> Correctness:
    """Passed only when every process's check passed; otherwise the first that failed says why."""
    corrs = [r.correctness or Correctness() for r in runs]
    failed = next((c for c in corrs if c.passed is False), None)
    if failed is not None:
        return failed
    return replace(corrs[-1], passed=True) if all(c.passed is True for c in corrs) else corrs[-1]


def _floor(ctx: RunContext, flops: Optional[float], nbytes: Optional[float], *, tensor_bytes: Optional[float], cold: bool) -> tuple[Optional[float], str]:
    """The physics floor the number is held to, from the measured ceilings; none off the claim's hardware."""
    if not ctx.ceilings or not ctx.matched:
        return None, ""
    from claimbench.machine.ceilings import Ceilings, floor_us

    hw = ctx.hw
    cache = (hw.gpus[0].l2_bytes if hw.gpus else 0) if ctx.device == "cuda" else (hw.cpu.llc_bytes or 0)
    return floor_us(flops, nbytes, Ceilings.from_dict(ctx.ceilings), dtype=ctx.dtype, cold=cold,
                    working_set_bytes=float(tensor_bytes or 0), cache_bytes=float(cache or 0))


def _source_hashes(ctx: RunContext, runs: Sequence[ClaimRun]) -> dict[str, str]:
    """sha256 of every project file under kernels/ the claim names or a side reported loading."""
    root = ctx.root.resolve()
    sources = set(claim_sources(ctx.root, ctx.claim))
    sources |= {(ctx.root / rel).resolve() for r in runs for rel in r.sources}
    kernels_dir = (ctx.root / "kernels").resolve()
    return {str(p.relative_to(root)): sha256_file(p) for p in sorted(sources)
            if p.is_file() and p.is_relative_to(kernels_dir)}


def _machine_load(runs: Sequence[ClaimRun], hw: Hardware, device: str) -> dict[str, Any]:
    """Other processes' share of the machine while timed, over every process of the run (weighted
    by their wall time), and the other processes seen on the claim's GPUs."""
    loads = [r.load for r in runs if r.load]
    wall = sum(x.wall_s for x in loads)
    frac = sum(x.other_cpu_fraction * x.wall_s for x in loads) / wall if wall > 0 else None
    gpus = max((len(g.other_processes) for g in hw.gpus), default=0) if device == "cuda" else None
    return {"other_cpu_fraction": None if frac is None else round(frac, 4), "other_gpu_processes": gpus}


def _host_allocator() -> dict[str, str]:
    from claimbench.orchestrator.servers import HOST_ALLOCATOR_ENV
    return {k: os.environ.get(k, v) for k, v in HOST_ALLOCATOR_ENV.items()}


def _blockers(hw: Hardware, ok: bool, device: str, *, runs: Sequence[ClaimRun]) -> tuple[str, ...]:
    """Why this run cannot verify even if its numbers clear the claim, over every process: each adds its
    own samples to the CI, so one that its clock could not resolve, or that timed the kernel in blocks,
    keeps the run from `verified` as the last one would (only the last was read before: a kernel replaying
    its answer within a block ran at 6x in two processes of three, an adversarial review)."""
    out = list(blockers(hw)) if ok and device == "cuda" else []
    said: set[str] = set()  # one line per kind, from the first process that shows it
    for run in [r for r in runs if r.timing is not None] or list(runs[-1:]):
        seen, timing = run.bracket or BracketSummary(), run.timing
        for side in SIDES:
            unresolved = seen.unresolved.get(side, 0)
            own = seen.side(side)
            taken = own.samples if own else 0
            if taken and unresolved > 0.02 * taken and side not in said:
                said.add(side)
                out.append(f"the orchestrator's clock could not resolve the {side}'s calls: {unresolved} of {taken} samples "
                           f"were no longer than a null call ({seen.null_us.get(side, 0):.0f} us); a "
                           "quieter machine or a larger workload gives it something to measure")
        n = ((timing.calls_per_block if timing else None) or {}).get("kernel") or 1
        if ok and timing is not None and timing.mode == "cpu" and n > 1 and "blocks" not in said:
            said.add("blocks")
            out.append(_blocked(n, timing, seen))
    return tuple(out)


def _interference(runs: Sequence[ClaimRun]) -> tuple[str, ...]:
    """Why a CPU run's number may owe something to what happened outside its timed calls, over every
    process of the run: interrupts that hit the baseline's calls and not the kernel's
    (`orchestrator/interrupts.py`), work in the kernel's refresh null calls (`orchestrator/untimed.py`);
    nothing for a run that timed nothing."""
    timed = [r.bracket for r in runs if r.timing is not None and r.bracket is not None]
    if not timed:
        return ()
    if any(not b.irq_wall_us for b in timed):  # timed, yet nothing counted: unchecked is never fine
        return (interrupts.blocker({"kernel": None, "baseline": None}, {}),)
    why = [interrupts.blocker(_over(timed, "irq"), _over(timed, "irq_wall_us")),
           untimed.blocker([untimed.excess(b.refresh, b.kernel.median_bracket_us if b.kernel else None) for b in timed]),
           runwait.blocker(_over(timed, "waited_us"), _over(timed, "wait_wall_us"))]
    return tuple(x for x in why if x)


def _over(brackets: Sequence[BracketSummary], name: str) -> dict[str, Any]:
    """Each side's sum of one per-side figure (`irq`, `waited_us`, ...) over the run's processes; None for a
    side whose figure some process could not read or did not keep."""
    out: dict[str, Any] = {}
    for side in SIDES:
        got = [getattr(b, name).get(side) for b in brackets]
        out[side] = None if any(x is None for x in got) else sum(got)
    return out


def _unchecked(runs: Sequence[ClaimRun]) -> tuple[str, ...]:
    """Why the timed calls of a measured run prove nothing about their answers, if they do not: none
    was checked against a reference, or no input changed between them (a kept result could be replayed)."""
    checks = [r.timed_checks for r in runs if r.timing is not None]
    if not checks:
        return ()
    if any(c is None for c in checks) or not sum(c.checked for c in checks if c is not None):
        return ("no timed call's answer was checked against a reference, so the timed calls could have returned "
                "anything",)
    why = next((c.unperturbed for c in checks if c is not None and c.unperturbed), "")
    if why:  # said even where other processes perturbed: each process's timed calls must prove themselves
        return (why,)
    if not sum(c.perturbed for c in checks if c is not None):
        return ("no input changed between timed calls (the claim's inputs hold no tensor to change), so a kernel "
                "could have replayed a result it kept; give make_inputs a tensor input",)
    return ()


def _blocked(n: int, timing: PairTiming, bracket: BracketSummary) -> str:
    """Why the kernel's calls were timed in blocks, which decides what settles it: a call shorter than
    the protocol's block is the workload's doing; a longer one was blocked only because the machine's
    noise (the null call's spread) asked for longer blocks, so a quieter machine settles it."""
    per_call = timing.kernel.median_us
    block_us = float(timing.config.get("min_block_us") or 0.0)
    iqr = float(bracket.null_iqr_us.get("kernel") or 0.0)
    if per_call is not None and block_us and per_call >= block_us:
        return (f"the machine's noise had the kernel's calls timed in blocks of {n}: a call takes {per_call:.0f} us, "
                f"but the null call's spread ({iqr:.0f} us) needs blocks of {RESOLUTION * iqr:.0f} us to resolve, so "
                "not every timed output could be checked; a quieter machine settles it")
    return (f"kernel calls were timed in blocks of {n} (each under the block time), so not every "
            "timed output could be checked; make the workload larger")


def _side(runs: Sequence[ClaimRun], side: str) -> SideTiming:
    """One side's kept samples of every process, each tagged with its round and its process."""
    samples: list[float] = []
    rounds: list[int] = []
    processes: list[int] = []
    dropped: list[float] = []
    for i, run in enumerate(runs):
        if run.timing is None:
            continue
        t = run.timing.kernel if side == "kernel" else run.timing.baseline
        samples += t.samples_us
        rounds += t.rounds or [0] * len(t.samples_us)
        processes += [i] * len(t.samples_us)
        dropped += t.dropped_us
    if not samples:
        return SideTiming(rounds=rounds, processes=processes, dropped_us=dropped)
    import numpy as np

    kept = np.asarray(samples)
    return SideTiming(samples_us=samples, rounds=rounds, processes=processes, dropped_us=dropped,
                      median_us=float(np.median(kept)),
                      iqr_us=float(np.percentile(kept, 75) - np.percentile(kept, 25)))
