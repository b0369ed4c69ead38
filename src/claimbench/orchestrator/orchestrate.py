"""One claim, orchestrated: three side processes, correctness first, then the timed rounds.

The orchestrator never imports claim code. It spawns the task side (inputs, reference), the kernel
side and the baseline side from the fork server, tells each what to load, and from then on owns
every random choice, the clock, the comparisons and the census. Whatever happens, every process of
the claim is killed and reaped before this returns, so the records are written after they are gone.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional

from claimbench.orchestrator import census
from claimbench.orchestrator import messages as m
from claimbench.orchestrator.channel import ChannelClosed, ChannelTimeout, ProtocolError
from claimbench.orchestrator.coordinate import Solo
from claimbench.orchestrator.job import BracketSummary, ClaimRun, Correctness, Job, MachineLoad, TimedChecks
from claimbench.orchestrator.memory import ReadError
from claimbench.orchestrator.processes import ForkServer
from claimbench.orchestrator.protocol import PairTiming, TimingConfig, measure_pair
from claimbench.orchestrator.rechecks import Rechecks
from claimbench.orchestrator.session import ClaimEnded, ClaimSession
from claimbench.orchestrator.sweep import CacheSweep
from claimbench.orchestrator.timed import RemoteTimer
from claimbench.orchestrator.trials import run_trials, seed_check
from claimbench.spec import ops

ROLES: tuple[m.Role, ...] = ("task", "kernel", "baseline")


@dataclass
class _Found:
    """What the orchestrator has seen of a claim so far; `freeze` makes it the `ClaimRun` it returns.
    ``flush`` and ``load_reference`` are for the timed phase only and stay out of the result."""

    seeds: dict[str, Any]
    outcome: Optional[str] = None
    outcome_reason: str = ""
    alone: bool = False
    phases_s: dict[str, float] = field(default_factory=dict)  # startup, verification, timing: wall seconds
    correctness: Optional[Correctness] = None
    versions: dict[str, str] = field(default_factory=dict)
    sources: tuple[str, ...] = ()
    timing: Optional[PairTiming] = None
    tensor_bytes: Optional[float] = None
    timed_checks: Optional[TimedChecks] = None
    bracket: Optional[BracketSummary] = None
    census: Optional[dict[str, Any]] = None
    load: Optional[MachineLoad] = None
    torch_threads: Optional[int] = None
    autotune: Optional[dict[str, Any]] = None
    flush: tuple[Optional[int], Optional[bool]] = (None, None)
    load_reference: Optional[tuple[Any, Any]] = None

    def freeze(self, rejections: tuple[str, ...]) -> ClaimRun:
        return ClaimRun(outcome=self.outcome, outcome_reason=self.outcome_reason, rejections=rejections,
                        correctness=self.correctness, timing=self.timing, tensor_bytes=self.tensor_bytes,
                        timed_checks=self.timed_checks, bracket=self.bracket, census=self.census, load=self.load,
                        torch_threads=self.torch_threads, sources=self.sources, versions=self.versions,
                        seeds=self.seeds, autotune=self.autotune, alone=self.alone,
                        startup_s=round(self.phases_s.get("startup", 0.0), 3),
                        verification_s=round(self.phases_s.get("verification", 0.0), 3),
                        timing_s=round(self.phases_s.get("timing", 0.0), 3))


def refs_for(claim, role: str) -> dict[str, str]:
    """What each side may import: the task never sees the kernel, the baseline never the kernel."""
    if role == "task":
        refs = {"workload.inputs": claim.workload.inputs}
        if claim.correctness.reference == "baseline-float64":
            refs["baseline.impl"] = claim.baseline.impl
            if claim.baseline.prepare:
                refs["baseline.prepare"] = claim.baseline.prepare
        else:
            refs["correctness.reference"] = claim.correctness.reference
        return refs
    side = getattr(claim, role)
    refs = {f"{role}.impl": side.impl}
    if side.prepare:
        refs[f"{role}.prepare"] = side.prepare
    if role == "kernel":
        refs["baseline.impl"] = claim.baseline.impl  # only to recognise its code in the trace
    return refs


def orchestrate(job: Job, server: ForkServer, say: Callable[[str], None], *, coord=None,
                group: Optional[dict] = None, stop: Optional[Callable] = None) -> ClaimRun:
    """One claim on this machine. With several ranks, ``coord`` is the orchestrators' own group and
    ``group`` says where each role's side processes meet (master address, port, store prefix)."""
    coord = coord if coord is not None else Solo()
    s = ClaimSession(server, time.monotonic() + job.timeout_s)
    found = _Found(seeds=job.seeds)
    rejections: list[str] = []
    log_fd = os.open(job.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644) if job.log_path else os.open(os.devnull, os.O_WRONLY)
    phase, phase_t0 = "startup", time.monotonic()

    def enter(name: str) -> None:  # each phase's wall seconds go into the record (budgets from costs)
        nonlocal phase, phase_t0
        now = time.monotonic()
        found.phases_s[phase] = found.phases_s.get(phase, 0.0) + now - phase_t0
        phase, phase_t0 = name, now

    try:
        _start(s, job, log_fd, say=say, found=found, coord=coord, group=group)
        found.load_reference = _load_reference(s)
        enter("verification")
        rejections += seed_check(s, job.claim, job.seeds["sensitivity"], measured=job.measured, coord=coord)
        if not rejections:
            corr, rej = run_trials(s, job.claim, device=job.device, dtype=job.dtype, seeds=job.seeds["trials"],
                                   measured=job.measured, say=say, coord=coord)
            found.correctness = corr
            rejections += rej
            passed = all(coord.gather(bool(corr.passed))) if coord.world > 1 else corr.passed
            if job.measured and passed and not rejections:
                enter("timing")
                rejections += _timed(s, job, say, found=found, coord=coord, stop=stop)
    except ClaimEnded as e:
        found.alone = True  # no other rank knows: a multi-rank run must stop the whole group
        if e.verdict in ("error", "timeout"):
            found.outcome, found.outcome_reason = e.verdict, e.reason
        elif e.verdict == "incorrect":
            found.correctness = Correctness(passed=False, reason=e.reason)
        else:
            rejections.append(e.reason)
    except ChannelTimeout as e:
        found.outcome, found.alone = "timeout", True
        found.outcome_reason = f"{e}: no answer within the {job.timeout_s:g} s limit"
    except (ChannelClosed, ProtocolError, ReadError) as e:
        op = _tripped(s, job.claim)
        if op:
            rejections.append(f"the kernel ran forbidden op aten::{op}: the tripwire on it ended the kernel's "
                              "process (its exit status names the op); a kernel must not use what its claim forbids")
            found.alone = True
        else:
            found.outcome, found.outcome_reason, found.alone = "error", _died(s, str(e), job.log_path), True
    finally:
        enter("done")
        os.close(log_fd)
        strays = _detached(s)
        server.kill_all()
        s.close()
    if strays:
        rejections.append(f"the claim's processes left {len(strays)} process(es) running outside their sessions "
                          f"(pids {', '.join(map(str, strays[:5]))}); a kernel must not leave work behind (they were killed)")
    return found.freeze(tuple(rejections))


def _start(s: ClaimSession, job: Job, log_fd: int, *, say, found: _Found, coord, group: Optional[dict]) -> None:
    env = {**job.env, "CLAIMBENCH_THREADS": str(job.threads or os.cpu_count() or 1)}
    cpu_limit = job.max_memory_bytes if job.device == "cpu" else None
    timer = None
    if job.device == "cuda" and job.measured:
        local = group["local_rank"] if group else 0
        gpus = job.hardware.get("gpus") or [{}]
        gpu = gpus[min(local, len(gpus) - 1)]
        timer = m.TimerSpec(l2_bytes=int(gpu.get("l2_bytes") or 50 << 20), hot=job.hot,
                            flush_bytes=job.timing.get("flush_bytes"), max_sm_clock_mhz=gpu.get("max_sm_clock_mhz"),
                            nvml_index=gpu.get("nvml_index"), device_index=local)
    sources: set[str] = set()
    s.pinned_cpus = side_cpus(job) if group is None else None
    for role in ROLES:
        say(f"starting the {role} side")
        s.sides[role] = side = s.server.spawn(role, env, log_fd=log_fd, max_memory_bytes=cpu_limit, root=job.root,
                                              no_event_sources=job.device == "cpu")
        side.freeze()
        if role != "task" and s.pinned_cpus is not None:
            census.pin([side.pid, *side.extra], s.pinned_cpus)
        found.versions = found.versions or dict(side.versions)
        dist = None
        if group is not None:
            dist = m.DistSpec(rank=coord.rank, world=coord.world, local_rank=group["local_rank"],
                              backend="nccl" if job.device == "cuda" else "gloo", master_addr=group["master_addr"],
                              master_port=group["master_port"], prefix=f"{group['prefix']}/{role}",
                              timeout_s=job.timeout_s)
        loaded = s.exchange(role, m.Load(role=role, root=str(job.root), refs=refs_for(job.claim, role),
                                         device=job.device, dtype=job.dtype,
                                         forbidden=list(job.claim.correctness.forbidden) if role == "kernel" else [],
                                         timer=timer if role != "task" else None, dist=dist), expect=m.Loaded)[0]
        sources |= set(loaded.sources)
        if role == "kernel":
            found.flush = (loaded.flush_bytes, loaded.l2_reset)
    found.sources = tuple(sorted(sources))


def side_cpus(job: Job) -> Optional[frozenset[int]]:
    """The CPUs kernel and baseline are pinned to on a CPU claim run with `--threads N` below this
    process's CPUs: the same last N for both (CPU 0 takes most interrupts). Without it a kernel could
    run its work on a thread of its own and take a second core its rival never had; torch's thread
    count is a setting, not a limit. None: no limit (every core, or ranks that share the machine)."""
    mine = sorted(os.sched_getaffinity(0))
    if job.device != "cpu" or not job.threads or job.threads >= len(mine):
        return None
    return frozenset(mine[-job.threads:])


def _timed(s: ClaimSession, job: Job, say, *, found: _Found, coord, stop) -> list[str]:
    claim = job.claim
    params = dict(claim.workload.params)
    cfg = TimingConfig.for_device(job.device, **{k: v for k, v in job.timing.items() if v is not None and k != "flush_bytes"})
    if job.device == "cuda" and cfg.min_sm_clock_mhz is None:
        top = ((job.hardware.get("gpus") or [{}])[0] or {}).get("max_sm_clock_mhz")
        if top:  # NVML's max clock, at least the default clock nvbench takes 75% of: the floor errs high
            cfg = replace(cfg, min_sm_clock_mhz=0.75 * float(top))
    flush, l2_reset = found.flush
    inputs = s.make_inputs(job.seeds["timing"], params)
    s.give("kernel", inputs)
    s.give("baseline", inputs)
    timer = RemoteTimer(s, job.device, hot=job.hot or not cfg.cold, min_block_us=cfg.min_block_us,
                        flush_bytes=flush, l2_reset=l2_reset, coord=coord)
    hooks = Rechecks(s, claim, params=params, seed=job.seeds["timing"], timer=timer,
                     calls_per_round=cfg.calls_per_round, device=job.device, coord=coord)
    hooks.expect_dtypes = found.correctness.first_output_dtypes() if found.correctness else None
    hooks.sweep = CacheSweep() if job.device == "cpu" and not job.hot else None
    hooks.max_memory_bytes, hooks.threads = job.max_memory_bytes, job.threads or os.cpu_count() or 1
    assert found.load_reference is not None, "the sides' shape after loading is read before the trials"
    hooks.shape_after_load, hooks.settings_after_load = found.load_reference
    hooks.server_shape = census.shape([s.server.host_pid]).get(s.server.host_pid)
    everyone = _own_processes(s)
    mark = census.load_mark(everyone)
    say("timing: warm-up")
    try:  # a wrong timed answer or a changed process ends the claim here: the record keeps the checks so far
        pair = measure_pair("kernel", "baseline", timer, config=cfg, hooks=hooks,
                            progress=lambda phase, detail: say(f"{phase}: {detail}"), clock=coord.clock, enough=stop)
        hooks.finish_round()
        hooks.check_processes()
    finally:
        found.timed_checks = TimedChecks(checked=hooks.checked, failed=len(hooks.failures), perturbed=hooks.perturbed,
                                         calls_per_block=timer.calls_per_block.get("kernel", 1),
                                         unperturbed=hooks.unperturbed, flipped=hooks.flipped,
                                         swept_bytes=hooks.sweep.nbytes if hooks.sweep is not None else 0)
    other, wall = census.other_fraction(mark, everyone)
    found.load = MachineLoad(other_cpu_fraction=round(other, 4), cpus=mark.ncpu, wall_s=round(wall, 3))
    found.timing = pair
    found.tensor_bytes = float(inputs.nbytes() + _output_bytes(s))
    found.bracket = timer.bracket.summary()
    found.census = _census_summary(hooks.shape_after_warmup or {}, s)
    probed = s.probe("kernel")
    found.torch_threads, found.autotune = probed.torch_threads, dict(probed.autotune)
    problems = _bracket_problems(timer, job.device, job.threads or os.cpu_count() or 1)
    if job.device == "cuda" and coord.world == 1:  # NCCL's own stream would trip it on several ranks
        checked = s.exchange("kernel", m.StreamCheck(), expect=m.StreamChecked)[0]
        if not checked.ok:
            problems.append(checked.why)
        s.release("kernel")
    return problems


RUN_PID_ENV = "CLAIMBENCH_RUN_PID"  # set by the launcher of a multi-rank claim: the run every rank belongs to


def _own_processes(s: ClaimSession, me: Optional[int] = None) -> list[int]:
    """Every process of this run, for the load meter: this rank's sides and fork server and, on
    several ranks, every rank's orchestrator, servers and sides (the tree of the launching
    `claimbench run`). Counting another rank's work as other load made every 2-rank CPU claim
    "machine busy" on an idle machine (issue 25)."""
    me = os.getpid() if me is None else me
    mine = [p for pids in s.members().values() for p in pids] + [s.server.host_pid, me]
    root = os.environ.get(RUN_PID_ENV, "")
    if root.isdigit() and int(root) != me:
        mine += census.tree([int(root)])
    return sorted(set(mine))


def _load_reference(s: ClaimSession) -> tuple[dict, dict]:
    """Each side's processes, pinning and thread settings right after loading, before any claim
    call: what the kernel's first call does to itself or its rival is then a change."""
    shape = {}
    for pids in s.members().values():
        shape.update(census.shape(pids))
    settings = {}
    for role in ("kernel", "baseline"):
        p = s.probe(role)
        settings[role] = {"torch threads": p.torch_threads, "inter-op threads": p.interop_threads}
    return shape, settings


def _detached(s: ClaimSession) -> list[int]:
    """Processes under the fork server that belong to no side: they called setsid, or their
    parent died and they were reparented to the server (a child subreaper)."""
    try:
        server = s.server.host_pid
    except ChannelClosed:
        return []
    table = census.all_stats()
    sides = {side.pid for side in s.sides.values()}
    out = []
    for pid in census.tree([server], table):
        st = table.get(pid)
        if pid == server or pid in sides or st is None or st.state in ("Z", "X"):
            continue
        if st.sid not in sides or st.ppid == server:
            out.append(pid)
    return sorted(out)


def _output_bytes(s: ClaimSession) -> int:
    called = s.call("kernel", m.Call())
    n = sum(b.span_bytes for b in called.outputs)
    s.release("kernel")
    return n


def _census_summary(shape: dict, s: ClaimSession) -> dict:
    out = {}
    for role, side in s.sides.items():
        mine = {pid: sh for pid, sh in shape.items() if pid in side.refresh()}
        out[role] = {"processes": len(mine) or 1, "threads": sum(sh.threads for sh in mine.values()),
                     "affinity": sorted({c for sh in mine.values() for a in sh.affinities for c in a})}
    return out


IDLE_CPU_S = 0.05  # a stopped side uses none; a tick or two of accounting noise is allowed
CORES_SLACK = 0.35  # the main thread's own work around the calls, and tick rounding
MIN_TIMED_S = 0.5   # below this, CPU accounting in 10 ms ticks says too little


def _bracket_problems(timer: RemoteTimer, device: str, threads: int = 0) -> list[str]:
    b = timer.bracket
    out = list(b.violations[:1])
    for side in ("kernel", "baseline"):
        wall = b.busy_wall_s[side]  # the wall time its CPU was read over, not the timed brackets alone
        if device == "cpu" and threads and wall >= MIN_TIMED_S:
            cores = b.busy_cpu_s[side] / wall
            if cores > threads + CORES_SLACK:
                out.append(f"the {side} side kept {cores:.2f} cores busy on average while timed, more than the "
                           f"{threads} thread(s) it was given")
    for side in ("kernel", "baseline"):
        idle, busy = b.idle_cpu_s[side], b.busy_cpu_s[side]
        if idle > IDLE_CPU_S + 0.02 * busy:
            out.append(f"the {side} side used {idle * 1000:.0f} ms of CPU while it was stopped or idle "
                       f"({busy * 1000:.0f} ms while timed)")
    for side in ("kernel", "baseline"):
        ours, own = b.brackets_us[side], b.side_us[side]
        if not ours:
            continue
        import statistics
        med_ours, med_own = statistics.median(ours), statistics.median(own)
        if device == "cpu" and med_own > med_ours * 1.10 + 20.0:
            out.append(f"the {side} side reported {med_own:.1f} us per sample, more than the {med_ours:.1f} us "
                       "the orchestrator saw around it")
        if device != "cpu" and b.event_us[side]:
            gaps = [x - e for x, e in zip(ours, b.event_us[side])]
            bound = 2.0 * b.null_us.get(side, 0.0) + 200.0
            if statistics.median(gaps) > bound:
                out.append(f"the {side} side spent {statistics.median(gaps):.0f} us per sample outside its CUDA events "
                           f"(bound {bound:.0f} us from null calls): work outside the timed region")
    return out


def _tripped(s: ClaimSession, claim) -> Optional[str]:
    """The forbidden op whose tripwire ended the kernel's process (side/tripwire.py), or None.

    The status is read from /proc while the process is a zombie (the fork server reaps only when
    told to, after this): the OS writes it, so it is the one report of the kernel's process that
    the kernel cannot rewrite. Its channel closes a moment before it becomes a zombie, hence the wait."""
    side = s.sides.get("kernel")
    forbidden = list(claim.correctness.forbidden)
    if side is None or not forbidden:
        return None
    deadline = time.monotonic() + 2.0
    while True:
        st = census.stat(side.pid)
        if st is None or st.state in ("Z", "X") or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if st is None or st.state not in ("Z", "X") or st.exit_code is None or st.exit_code & 0x7F:
        return None  # gone already, still running, or killed by a signal
    return ops.tripped(forbidden, (st.exit_code >> 8) & 0xFF)


def _died(s: ClaimSession, why: str, log_path: Optional[Path]) -> str:
    """Who died and how, with the last line the claim's processes printed."""
    last = _last_line(log_path)
    tail = f": {last}" if last else ""
    for role, side in s.sides.items():
        st = census.stat(side.pid)
        if st is None or st.state in ("Z", "X"):
            how = census.exit_text(st.exit_code if st is not None else None)
            return f"the {role} side {how} before answering{tail}"
    if not s.server.alive():
        return f"the fork server died ({why}); something in the claim killed it{tail}"
    return why + tail


def _last_line(path: Optional[Path]) -> str:
    if path is None:
        return ""
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 4000))
            lines = f.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
