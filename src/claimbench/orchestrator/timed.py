"""The timed rounds, driven from the orchestrator: its clock, its random choices, its checks.

`timing.measure_pair` keeps the protocol (warm-up by time, paired ABBA rounds, throttled samples
dropped, stopping); this module gives it a timer whose samples are exchanges with a side:
- CPU: the orchestrator's clock brackets the exchange; a calibrated null call (the same message
  path with no claim code) is subtracted. The side's own figure is kept as evidence only.
- CUDA: the side's events are the sample, and must fit inside the orchestrator's bracket of the
  same exchange; the gap between them is held to a bound calibrated with null calls.
Each round hands both sides fresh buffers (new memfds, new addresses), as each correctness trial
does, so a timed call cannot be told from a checked one by where its operands live. Before each
kernel sample the orchestrator changes, in every floating-point input, elements that meet every
index of every axis (orchestrator/perturb.py; CPU: in the pages it owns, CUDA: sent with the call; a
baseline with `prepare` re-derives its operands from them, untimed; a kernel's go into the operands its
`prepare` passed through, untimed, and its `prepare` never sees them), reads every kernel output of the round
while the side is stopped (CPU), and after the round draws which one to check against a fresh
reference, with the dtype and shape the trials established. Those checks are
`rechecks.Rechecks`, the protocol's hooks; this module is the timer.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Optional

from claimbench.orchestrator import census, interrupts, runwait, untimed
from claimbench.orchestrator import messages as m
from claimbench.orchestrator.coordinate import Solo
from claimbench.orchestrator.job import BracketSummary, SideBracket
from claimbench.orchestrator.protocol import Sample
from claimbench.orchestrator.session import ClaimEnded, ClaimSession

if TYPE_CHECKING:  # the hooks are built after the timer, in orchestrate.py
    from claimbench.orchestrator.rechecks import Rechecks

_NOW = time.perf_counter_ns
NULL_CALLS = 31
RESOLUTION = 3.0  # a CPU block lasts at least this many times the null call's interquartile range (the CI and the unresolved count guard the rest)


@dataclass
class Bracket:
    """What the orchestrator's clock saw, per side: kept in the record's protocol."""

    null_us: dict = field(default_factory=dict)        # median bracket of a null call, per side
    null_iqr_us: dict = field(default_factory=dict)    # its spread: a block must be long against it
    unresolved: dict = field(default_factory=lambda: {"kernel": 0, "baseline": 0})  # samples at or below a null call
    busy_cpu_s: dict = field(default_factory=lambda: {"kernel": 0.0, "baseline": 0.0})  # /proc, every exchange
    # the wall time busy_cpu_s was read over (every exchange, timed or not, from the first CPU read to the
    # last): the cores a side used are busy over this, never over the timed brackets alone, which leave
    # out warm-up and recheck calls (a 64 MB naive softmax "used 2.41 cores" of 2, found by a sweep)
    busy_wall_s: dict = field(default_factory=lambda: {"kernel": 0.0, "baseline": 0.0})
    idle_cpu_s: dict = field(default_factory=lambda: {"kernel": 0.0, "baseline": 0.0})  # /proc, while stopped
    brackets_us: dict = field(default_factory=lambda: {"kernel": [], "baseline": []})
    side_us: dict = field(default_factory=lambda: {"kernel": [], "baseline": []})
    event_us: dict = field(default_factory=lambda: {"kernel": [], "baseline": []})
    violations: list = field(default_factory=list)
    synced: set = field(default_factory=set)  # CUDA sides whose calls waited for the GPU inside (issue 23)
    # CPU: the counted interrupts on the timed cores during each side's timed exchanges and refresh nulls
    # (None once a count failed) and the time they were counted over (`interrupts`); every refresh null
    # call's bracket (`untimed`)
    irq: dict = field(default_factory=lambda: {"kernel": 0, "baseline": 0})
    irq_wall_us: dict = field(default_factory=lambda: {"kernel": 0.0, "baseline": 0.0})
    refresh_us: dict = field(default_factory=lambda: {"kernel": [], "baseline": []})
    # CPU: how long each side's threads waited for a core in its timed exchanges (None once a read failed),
    # and the time that was read over (`runwait`)
    waited_us: dict = field(default_factory=lambda: {"kernel": 0.0, "baseline": 0.0})
    wait_wall_us: dict = field(default_factory=lambda: {"kernel": 0.0, "baseline": 0.0})

    def summary(self) -> BracketSummary:
        """The record's `bracket`: null calls, CPU use, per side the median bracket, side figure and event gap,
        the null subtracted, and the first 10 violations."""
        sides: dict[str, Optional[SideBracket]] = {}
        for side in ("kernel", "baseline"):
            b, own, events = self.brackets_us[side], self.side_us[side], self.event_us[side]
            sides[side] = SideBracket(
                median_bracket_us=statistics.median(b), median_side_us=statistics.median(own), samples=len(b),
                median_gap_us=statistics.median([x - e for x, e in zip(b, events)]) if events else None) if b else None
        both = len(self.null_us) == 2
        return BracketSummary(
            null_us=dict(self.null_us), null_iqr_us=dict(self.null_iqr_us), unresolved=dict(self.unresolved),
            busy_cpu_s=dict(self.busy_cpu_s), busy_wall_s=dict(self.busy_wall_s), idle_cpu_s=dict(self.idle_cpu_s),
            kernel=sides["kernel"], baseline=sides["baseline"],
            null_subtracted_us=min(self.null_us.values()) if both else None,
            null_gap_us=self.null_us.get("kernel", 0.0) - self.null_us.get("baseline", 0.0) if both else None,
            violations=tuple(self.violations[:10]), synced=tuple(sorted(self.synced)),
            **({"irq": dict(self.irq), "irq_wall_us": dict(self.irq_wall_us)} if self.irq_wall_us["kernel"] else {}),
            **({"waited_us": dict(self.waited_us), "wait_wall_us": dict(self.wait_wall_us)}
               if self.wait_wall_us["kernel"] else {}),
            refresh=untimed.refresh_figures(self.refresh_us))


class RemoteTimer:
    """measure_pair's Timer, over exchanges with the kernel and baseline sides."""

    def __init__(self, s: ClaimSession, device: str, *, hot: bool, min_block_us: float,
                 flush_bytes: Optional[int], l2_reset: Optional[bool], coord=None) -> None:
        self.s, self.device = s, device
        self.coord = coord if coord is not None else Solo()
        self.mode = "cpu" if device == "cpu" else ("hot" if hot else "cold")
        self.name = "orchestrator-bracket" if device == "cpu" else "cuda-event-in-bracket"
        if self.coord.world > 1:
            self.name += f", max over {self.coord.world} ranks"
        self.flush_bytes = flush_bytes if self.mode == "cold" else None
        self.l2_reset = l2_reset if self.mode == "cold" else None
        self.min_block_us = min_block_us
        self.calls_per_block: dict[str, int] = {}
        self.bracket = Bracket()
        self.hooks: Optional["Rechecks"] = None
        self.unreleased: set[str] = set()
        self.nulls: dict[str, list[float]] = {}

    def _exchange(self, side: str, msg: m.Call) -> tuple[m.Called, float]:
        if side in self.unreleased:
            self.s.release(side)
            self.unreleased.discard(side)
        proc = self.s.sides[side]
        members = [proc.pid, *proc.extra]
        proc.thaw()
        w0 = _NOW()
        cpu0 = census.cpu_seconds(members)
        _wait_running(proc.pid)
        left = self.s.left()
        t0 = _NOW()
        try:
            proc.channel.send(msg)
            reply, fds = proc.channel.recv(left)
        finally:
            t1 = _NOW()
            proc.freeze()
        if proc.handled_extra:  # seen at this freeze or an earlier one, whenever it was put in place
            raise ClaimEnded("rejected", "the claim's processes changed: " + census.handlers_problem(proc.pid, proc.handled_extra))
        self.bracket.busy_cpu_s[side] += max(0.0, (proc.cpu_at_freeze or cpu0) - cpu0)
        self.bracket.busy_wall_s[side] += (_NOW() - w0) / 1e9  # freeze read its CPU last
        self.bracket.idle_cpu_s[side] = proc.idle_cpu_s
        if isinstance(reply, m.Failed):
            raise ClaimEnded(reply.verdict, reply.message)
        if not isinstance(reply, m.Called):
            raise ClaimEnded("error", f"the {side} side answered {reply.kind!r} to a call")
        self.unreleased.add(side)
        return reply, (t1 - t0) / 1000.0

    def call(self, side: str) -> Any:
        """An untimed call as one exchange with the side named ``side``; its outputs are released before the
        next exchange. Returns the side's Called reply."""
        reply, _ = self._exchange(side, m.Call())
        return reply

    def _null(self, side: str) -> float:
        if side not in self.nulls:
            timed: Literal["cpu", "cuda"] = "cpu" if self.device == "cpu" else "cuda"
            self.nulls[side] = [self._exchange(side, m.Call(null=True, timed=timed))[1] for _ in range(NULL_CALLS)]
            self._summarize_nulls(side)
        return self.bracket.null_us[side]

    def _refresh_null(self, side: str) -> float:
        """One more null call next to each CPU sample, its bracket returned: the subtraction follows the machine's state
        (its load, the side's own threads winding down) instead of a snapshot from the warm-up."""
        us = self._exchange(side, m.Call(null=True, timed="cpu"))[1]
        self.nulls[side].append(us)
        self._summarize_nulls(side)
        return us

    def _calibration(self, side: str) -> float:
        """What a CPU sample has subtracted: the smaller of the two sides' null medians.

        A side's null call runs in its own process, which can hold it (issue 22: the kernel side held
        each null for 35% of a real call, and the subtraction made it look faster). A side can only
        lengthen its null, never shorten it below the exchange's real cost, so the smaller of the two
        is one neither can inflate; the gap between them is kept in the record."""
        self._null(side)
        return min(self.bracket.null_us.values())

    def _summarize_nulls(self, side: str) -> None:
        xs = sorted(self.nulls[side])
        self.bracket.null_us[side] = statistics.median(xs)
        self.bracket.null_iqr_us[side] = xs[3 * len(xs) // 4] - xs[len(xs) // 4]

    def calibrate(self, side: str, fn: Any) -> int:
        """Times the side's null calls first. Cold CUDA keeps one call per sample; CPU and hot double a block
        (median of three samples per size) until it lasts `block_target`. Returns the calls made."""
        self._null(side)
        if self.mode == "cold":
            self.calls_per_block[side] = 1
            return 0
        # on CPU the block must also be long against the null call's own spread, or the subtraction
        # leaves mostly noise; samples at or below zero are counted and refuse the run past 2%
        target = self.block_target(side)
        n, made = 1, 0
        while True:  # the median of three samples per size: one lucky sample must not end the search
            self.calls_per_block[side] = n
            per_call = statistics.median(self.sample(side, fn, record=False).us for _ in range(3))
            made += 3 * n
            if per_call * n >= target or n >= 1 << 20:
                return made
            n *= 2

    def block_target(self, side: str) -> float:
        """How long a block must last, the same on every rank: each rank's null spread is its own,
        and a rank that stopped doubling before the others would make one call fewer than they
        do, so their collectives would wait on each other until the claim's time ran out."""
        target = max(self.min_block_us, RESOLUTION * self.bracket.null_iqr_us.get(side, 0.0)) \
            if self.device == "cpu" else self.min_block_us
        return self.coord.max([target])[0] if self.coord.world > 1 else target

    def sample(self, side: str, fn: Any, record: bool = True) -> Sample:
        """One exchange timed from here. CPU: the orchestrator's bracket less the smaller null median, per call;
        CUDA: the side's events, held to the bracket. With ranks, the slowest; ``record=False`` keeps no figures."""
        n = self.calls_per_block.get(side, 1)
        edits = self.hooks.take_edits(side) if self.hooks is not None and self.device != "cpu" else []
        timed: Literal["cpu", "cuda"] = "cpu" if self.device == "cpu" else "cuda"
        # CPU: each refresh null call is kept (`Bracket.refresh_us`): it is made after the inputs changed, and a
        # kernel side that works there, untimed, answers it late (`orchestrator/untimed.py`)
        cpu = self.device == "cpu" and record
        irq0 = interrupts.count(self.s.pinned_cpus) if cpu else None  # over the refresh null too
        refresh = self._refresh_null(side) if cpu and side in self.nulls else 0.0  # before: after, its output stays for the reads
        if refresh:
            self.bracket.refresh_us[side].append(refresh)
        self.coord.barrier()  # every rank's sample starts together: a collective waits for its slowest rank
        b = self.bracket
        pid = self.s.sides[side].pid if cpu else 0
        mine = side == "kernel"  # the kernel's helper threads may not widen the baseline's allowance (runwait.py)
        wait0 = runwait.waited_ns(pid, calling_thread_only=mine) if cpu else None
        reply, bracket_us = self._exchange(side, m.Call(n=n, timed=timed, edits=edits))
        if cpu:
            irq1, had = interrupts.count(self.s.pinned_cpus), b.irq[side]
            b.irq[side] = None if had is None or irq0 is None or irq1 is None else had + irq1 - irq0
            b.irq_wall_us[side] += bracket_us + refresh
            wait1, waited = runwait.waited_ns(pid, calling_thread_only=mine), b.waited_us[side]
            b.waited_us[side] = None if waited is None or wait0 is None or wait1 is None else waited + (wait1 - wait0) / 1e3
            b.wait_wall_us[side] += bracket_us
        if self.device == "cpu":
            net = bracket_us - self._calibration(side)
            if net <= 0.0 and record:
                b.unresolved[side] += 1
            us = max(net, 1e-3) / n  # never zero: the count above makes a run it could not resolve inconclusive
            if record:
                b.brackets_us[side].append(bracket_us)
                b.side_us[side].append(reply.side_us * n)
            return Sample(us=self._slowest(us), out=reply, calls=n)
        ev = float(reply.event_us or 0.0)
        if record:
            b.brackets_us[side].append(bracket_us)
            b.side_us[side].append(reply.side_us)
            b.event_us[side].append(ev * n)
            if ev * n > bracket_us * 1.001 + 5.0:
                b.violations.append(f"{side}: events {ev * n:.1f} us inside a bracket of {bracket_us:.1f} us")
            if reply.synced:  # timed, not rejected: its events span the wait, so its number is its host time
                b.synced.add(side)
        reasons, clock = reply.throttle_reasons, reply.sm_clock_mhz
        if self.coord.world > 1:
            ev, bits, neg = self.coord.max([ev, float(int(reasons or 0)), -(clock or 1e9)])
            reasons, clock = (int(bits) if reasons is not None or bits else None), (None if neg <= -1e9 else -neg)
        return Sample(us=ev, out=reply, throttle_reasons=reasons, sm_clock_mhz=clock, calls=n)

    def _slowest(self, us: float) -> float:
        return self.coord.max([us])[0] if self.coord.world > 1 else us


def _wait_running(pid: int, timeout_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = census.state(pid)
        if st is None or st not in ("T", "t"):
            return
