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
index of every axis (orchestrator/perturb.py; CPU: in the pages it owns, CUDA: sent with the call; a side
with `prepare` re-derives its operands from them, untimed), reads every kernel output of the round
while the side is stopped (CPU), and after the round draws which one to check against a fresh
reference, with the dtype and shape the trials established.
"""

from __future__ import annotations

import random
import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Literal, NoReturn, Optional

import numpy as np

from claimbench.orchestrator import census
from claimbench.orchestrator import messages as m
from claimbench.orchestrator import perturb as perturbation
from claimbench.orchestrator.coordinate import Solo
from claimbench.orchestrator.job import BracketSummary, SideBracket
from claimbench.orchestrator.protocol import Sample
from claimbench.orchestrator.session import ClaimEnded, ClaimSession, InputSet
from claimbench.verify import accuracy, codec

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
            violations=tuple(self.violations[:10]), synced=tuple(sorted(self.synced)))


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

    def _refresh_null(self, side: str) -> None:
        """One more null call next to each CPU sample: the subtraction follows the machine's state
        (its load, the side's own threads winding down) instead of a snapshot from the warm-up."""
        self.nulls[side].append(self._exchange(side, m.Call(null=True, timed="cpu"))[1])
        self._summarize_nulls(side)

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
        if self.device == "cpu" and record and side in self.nulls:
            self._refresh_null(side)  # before the sample: after it, its output must stay for the reads
        self.coord.barrier()  # every rank's sample starts together: a collective waits for its slowest rank
        reply, bracket_us = self._exchange(side, m.Call(n=n, timed=timed, edits=edits))
        b = self.bracket
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


class Rechecks:
    """measure_pair's hooks: new inputs each round, one changed element before each kernel sample,
    every kernel output of the round read, one drawn afterwards and checked, a census per round."""

    def __init__(self, s: ClaimSession, claim, *, params: dict, seed: int, timer: RemoteTimer, calls_per_round: int, device: str, coord=None) -> None:
        self.coord = coord if coord is not None else Solo()
        self.s, self.claim, self.params, self.seed, self.timer = s, claim, params, seed, timer
        self.calls_per_round, self.device = calls_per_round, device
        self.rng = random.SystemRandom()
        self.inputs: Optional[InputSet] = None
        self.edits: list[m.Edit] = []
        self.pending: dict[str, list[m.Edit]] = {"kernel": [], "baseline": []}
        self.candidates: list[tuple[list[np.ndarray], list[m.Edit], list[m.Buffer]]] = []
        self.checked = 0
        self.failures: list[str] = []
        self.perturbed = 0
        self.shape_after_warmup: Optional[dict] = None
        self.shape_after_load: dict = {}      # taken before any claim call: pinning and settings must stay
        self.server_shape: Optional[census.ProcessShape] = None  # the fork server's: every side shares its cgroup
        self.settings_after_load: dict = {}
        self.max_memory_bytes: Optional[int] = None
        self.threads: int = 0
        self.census_problems: list[str] = []
        self.expect_dtypes: Optional[list[str]] = None  # the outputs' dtypes in the correctness trials
        self.stale: set[str] = set()  # prepared sides whose operands must be re-derived before their next call
        timer.hooks = self

    # -- rounds ----------------------------------------------------------------------------
    def before_round(self, r: int) -> None:
        """Checks the last round, gives both sides round ``r``'s inputs in fresh memfds, then rejects the claim
        if its processes, pinning or thread settings changed, or ends it past --max-memory."""
        self.finish_round()
        if self.shape_after_warmup is None:
            self.shape_after_warmup = self._shape()
        inputs = self.s.make_inputs(self.seed + 104729 * (r + 1), self.params)
        for role in ("kernel", "baseline"):  # fresh memfds, as every trial gets: no address tells them apart
            self.s.give(role, inputs)
        self.stale = set()
        if self.inputs is not None:
            self.s.drop(self.inputs)
        self.inputs, self.edits = inputs, []
        self.pending = {"kernel": [], "baseline": []}
        members = self.s.members()  # one look at /proc serves every check of this round
        now = self._shape(members)
        problems = census.differences(self.shape_after_warmup, now)
        problems += census.differences(self.shape_after_load, now, pinning_only=True)
        problems += census.unlike(now, self.server_shape)
        rivals = {pid for role in ("kernel", "baseline") for pid in members.get(role, ())}
        problems += census.outside({pid: sh for pid, sh in now.items() if pid in rivals}, self.s.pinned_cpus)
        if self.device == "cpu" and self.threads:
            problems += self._thread_growth(now)
        settings = self._settings()
        problems += [f"the {role} side's {what} changed from {self.settings_after_load[role][what]} to {v}"
                     for role, got in settings.items() for what, v in got.items()
                     if self.settings_after_load[role].get(what) != v]
        if problems:
            raise ClaimEnded("rejected", "the claim's processes changed between rounds: " + "; ".join(problems[:4]))
        rss = census.rss_bytes([p for pids in members.values() for p in pids])
        if self.max_memory_bytes and rss > self.max_memory_bytes:
            raise ClaimEnded("error", f"the claim's processes hold {rss / 2**30:.1f} GiB, above --max-memory "
                             f"{self.max_memory_bytes / 2**30:.1f} GiB")

    def _thread_growth(self, now: dict) -> list[str]:
        """torch gives a CPU side one OpenMP worker per thread beyond the first, on its first
        parallel call; more than that means it ran more threads than it was given, whatever its
        settings say when it returns."""
        out = []
        for role in ("kernel", "baseline"):
            pid = self.s.sides[role].pid
            before, after = self.shape_after_load.get(pid), now.get(pid)
            if before is not None and after is not None and after.threads - before.threads > self.threads - 1:
                out.append(f"the {role} side runs {after.threads} threads, {after.threads - before.threads} more than "
                           f"when it was loaded; it was given {self.threads}")
        return out

    def take_load_reference(self) -> None:
        """Records the sides' process shape and thread settings now, the baseline later rounds are held to
        (orchestrate sets the same fields from its `_load_reference`)."""
        self.shape_after_load, self.settings_after_load = self._shape(), self._settings()

    def _shape(self, members: Optional[dict[str, list[int]]] = None) -> dict:
        out = {}
        for _role, pids in (members if members is not None else self.s.members()).items():
            for pid, shape in census.shape(pids).items():
                out[pid] = shape
        return out

    def _settings(self) -> dict:
        """What each side says of its thread settings (evidence; its threads are counted in /proc)."""
        out = {}
        for role in ("kernel", "baseline"):
            p = self.s.probe(role)
            out[role] = {"torch threads": p.torch_threads, "inter-op threads": p.interop_threads}
        return out

    def _prepared(self, role: str) -> bool:
        return getattr(self.claim, role).prepare is not None

    def before_sample(self, side: str, r: int) -> None:
        """Perturbs the inputs before a kernel sample; a side with `prepare` re-derives its operands from them
        (a Refill, untimed) before its next sample."""
        if side == "kernel" and self.inputs is not None:
            self._perturb()
        if side in self.stale:  # its `prepare` must see the inputs as they are now (untimed)
            self.s.exchange(side, m.Refill(edits=self.take_edits(side) if self.device != "cpu" else []), expect=m.Done)
            self.stale.discard(side)

    def _perturb(self) -> None:
        """Change every floating-point input for the next kernel sample, in both sides' copies."""
        assert self.inputs is not None
        for i, it in enumerate(self.inputs.items):
            kbuf = self.s.operands["kernel"].buffers[i]
            if not isinstance(it, m.TensorItem) or it.dtype not in codec.FLOATING or kbuf is None or not kbuf.nbytes:
                continue
            edit = perturbation.plan_edit(i, it, kbuf.view, rng=self.rng)  # drawn now: after the last call returned
            size = codec.itemsize(it.dtype)
            if self.device == "cpu":  # our own pages: the side takes no part
                for role in ("kernel", "baseline"):
                    rbuf = self.s.operands[role].buffers[i]
                    assert rbuf is not None
                    perturbation.apply_to_bytes(rbuf.view, edit, size)
            else:
                perturbation.apply_to_bytes(kbuf.view, edit, size)  # ours mirror theirs: the next edit reads them
                self.pending["kernel"].append(edit)
                self.pending["baseline"].append(edit)
            self.edits.append(edit)
            self.perturbed += 1
        self.stale |= {role for role in ("kernel", "baseline") if self._prepared(role)}

    def take_edits(self, side: str) -> list[m.Edit]:
        """The perturbations not yet sent to ``side``, handed over once: a CUDA side applies them itself."""
        out, self.pending[side] = self.pending[side], []
        return out

    def after_sample(self, side: str, r: int, out: Any) -> None:
        """Keeps a kernel sample's outputs as a candidate for the round's check (CPU: every one; CUDA: about one
        a round, drawn before staging), then releases the side's outputs."""
        if side == "kernel" and isinstance(out, m.Called):
            if self.device == "cpu":  # every output is read: the kernel cannot know which one counts
                raws = [self.s.output_raw("kernel", i, b) for i, b in enumerate(out.outputs)]
                self.candidates.append((raws, list(self.edits), list(out.outputs)))
            elif self.coord.broadcast(self.rng.random() < 1.0 / max(1, self.calls_per_round)):
                staged = self.s.exchange("kernel", m.Emit(), expect=m.Outputs)[0].outputs
                raws = [self.s.output_raw("kernel", i, b) for i, b in enumerate(staged)]
                self.candidates.append((raws, list(self.edits), list(staged)))
        self.s.release(side)
        self.timer.unreleased.discard(side)

    def finish_round(self) -> None:
        """Draws one candidate of the round, after its calls returned, and checks it against a fresh reference
        with that sample's edits. A mismatch ends the claim `rejected` at once: one wrong timed answer already
        decides the verdict, so more rounds and processes would only spend the machine's time (on a GPU, the
        full-size rounds) to say the same."""
        if self.inputs is None or not self.candidates:
            self.candidates = []
            return
        pick = self.coord.broadcast(self.rng.randrange(len(self.candidates)))  # drawn after the calls returned
        raws, edits, bufs = self.candidates[min(pick, len(self.candidates) - 1)]
        self.candidates = []
        ref = self.s.reference(self.inputs, edits)
        outs = [codec.from_bytes(raw, b.dtype, b.shape, strides=b.strides) for raw, b in zip(raws, bufs)]
        self.checked += 1
        if len(outs) != len(ref):
            self._wrong(f"{len(outs)} outputs, the reference has {len(ref)}")
        for i, (o, rr) in enumerate(zip(outs, ref)):
            expect = self.expect_dtypes[i] if self.expect_dtypes and i < len(self.expect_dtypes) else None
            res = accuracy.compare(o, rr, self.claim.correctness, out_dtype=bufs[i].dtype, expect_dtype=expect)
            if not res["passed"]:
                self._wrong(f"output {i}: {res['reason']}")

    def _wrong(self, why: str) -> NoReturn:
        self.failures.append(why)
        raise ClaimEnded("rejected", f"timed calls returned wrong answers ({len(self.failures)} of {self.checked} "
                         f"checked): {why}")
