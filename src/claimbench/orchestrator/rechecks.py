"""The checks inside the timed rounds: what keeps a timed call from being easier than a checked one.

`Rechecks` is `timing.measure_pair`'s set of hooks (the timer is `timed.RemoteTimer`). Each round
hands both sides fresh buffers, so a timed call cannot be told from a checked one by where its
operands live; before each kernel sample elements meeting every index of every axis (and every
combination of the leading axes' indices, up to a budget) change
in every floating-point input (orchestrator/perturb.py), so a result cannot be reused; every kernel
output of the round is read while the side is stopped (CPU), and afterwards one is drawn at random
and checked against a fresh reference with the dtype and shape the correctness trials established.
A census per round watches the sides' processes. The first wrong answer ends the claim.
"""

from __future__ import annotations

import random
from typing import Any, NoReturn, Optional

import numpy as np

from claimbench.orchestrator import census, wakers
from claimbench.orchestrator import messages as m
from claimbench.orchestrator import perturb as perturbation
from claimbench.orchestrator.coordinate import Solo
from claimbench.orchestrator.memory import ReadError, write_remote
from claimbench.orchestrator.session import ClaimEnded, ClaimSession, InputSet
from claimbench.orchestrator.sweep import CacheSweep
from claimbench.orchestrator.timed import RemoteTimer
from claimbench.verify import accuracy, codec


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
        self.seen_in_round = 0  # CUDA kernel samples of this round so far (the reservoir's k)
        self.failures: list[str] = []
        self.perturbed = 0
        self.constant: set[int] = set()  # integer inputs of one value only: nothing can change them (perturb.constant)
        self.flipped = 0  # of `perturbed`: the edits with a dense part (signs.py: a flip, a step, a shift)
        self.unmoved: Optional[bool] = None  # whether the changes left the reference's answer as it was (first check)
        self.sweep: Optional[CacheSweep] = None  # CPU, unless --hot: the caches read through before each sample
        self.shape_after_warmup: Optional[dict] = None
        self.shape_after_load: dict = {}      # taken before any claim call: pinning and settings must stay
        self.server_shape: Optional[census.ProcessShape] = None  # the fork server's: every side shares its cgroup
        self.settings_after_load: dict = {}
        self.max_memory_bytes: Optional[int] = None
        self.threads: int = 0
        self.census_problems: list[str] = []
        self.expect_dtypes: Optional[list[str]] = None  # the outputs' dtypes in the correctness trials
        self.stale: set[str] = set()  # prepared sides whose operands must be re-derived before their next call
        self.operand_edits: list[m.Edit] = []  # for a kernel with `prepare`: changes for its passed-through operands
        self.operand_sources: list[int] = []  # the input each of those edits changed (CPU: we write its bytes)
        self.signed: dict[int, bool] = {}  # per input of the round: does it hold negative values (signs.py flips their signs, else mantissas)
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
        self.operand_edits, self.operand_sources = [], []
        self.signed = {}
        if self.inputs is not None:
            self.s.drop(self.inputs)
        self.inputs, self.edits = inputs, []
        self.pending = {"kernel": [], "baseline": []}
        self.check_processes()

    def check_processes(self) -> None:
        """Rejects the claim if its processes, pinning, thread settings or signal handlers changed, or ends
        it past --max-memory: before every round, and once after the last (a handler installed during the
        last round must not outlast every look)."""
        if self.shape_after_warmup is None:  # no round began: nothing to compare with
            return
        members = self.s.members()  # one look at /proc serves every check of this round
        now = self._shape(members)
        problems = census.differences(self.shape_after_warmup, now)
        problems += census.differences(self.shape_after_load, now, pinning_only=True)
        problems += census.unlike(now, self.server_shape)
        problems += [census.handlers_problem(p.pid, p.handled_extra) for p in self.s.sides.values() if p.handled_extra]
        rivals = {pid for role in ("kernel", "baseline") for pid in members.get(role, ())}
        problems += census.outside({pid: sh for pid, sh in now.items() if pid in rivals}, self.s.pinned_cpus)
        if self.device == "cpu" and self.threads:
            problems += self._thread_growth(now)
        if self.device == "cpu" and (firing := wakers.problems(members)):  # a stopped side's timers fire into the other's timed calls
            raise ClaimEnded("rejected", "; ".join(firing[:2]))
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
        """Perturbs the inputs before a kernel sample, all untimed: a kernel with `prepare` gets the change
        written into the operands its `prepare` passed through (its `prepare` never sees a timed call's
        inputs, or it could compute that call's answer untimed: verified 1.70x, an adversarial review);
        a baseline with `prepare` re-derives its operands from the changed inputs (a Refill)."""
        if side == "kernel" and self.inputs is not None:
            self._perturb()
            if self._prepared("kernel") and self.operand_edits:
                edits, self.operand_edits = self.operand_edits, []
                sources, self.operand_sources = self.operand_sources, []
                if self.device == "cpu":
                    self._write_operands(list(zip(sources, (e.operand for e in edits))))
                else:  # device memory: only the side can write it (docs/threats.md: open on a GPU)
                    self.s.exchange("kernel", m.Refill(edits=edits, operands=True), expect=m.Done)
        elif side == "baseline" and self.inputs is not None and self.device == "cpu":
            self._flip_baseline()
        if side in self.stale:  # its `prepare` must see the inputs as they are now (untimed)
            self.s.exchange(side, m.Refill(edits=self.take_edits(side) if self.device != "cpu" else []), expect=m.Done)
            self.stale.discard(side)
        if self.sweep is not None:  # last: the rewritten inputs go back to memory (sweep.py)
            self.sweep()

    def _write_operands(self, pairs: list[tuple[int, int]]) -> None:
        """CPU: the changed inputs' bytes, written by us into the operands the kernel's `prepare` passed them
        through to, while its side is stopped. Written by the side itself (a Refill), the changes left it
        running after them and before the timed call: a profile hook set from C at import multiplied there,
        untimed, 13.3x verified for an honest 1.0x (an adversarial review). Where the side says an operand
        lives is only its word, so a false address costs it its own inputs, whose answers are rechecked."""
        side = self.s.sides["kernel"]
        if not side.wait_stopped():
            raise ClaimEnded("error", "the kernel side did not stop when told to")
        kbufs, prepared = self.s.operands["kernel"].buffers, self.s.operands["kernel"].prepared
        for i, j in pairs:  # input i, passed through to operand j
            kbuf, op = kbufs[i], prepared[j] if 0 <= j < len(prepared) else None
            if kbuf is None or op is None or op.device != "cpu" or op.span_bytes != kbuf.nbytes \
                    or not codec.is_contiguous(list(op.shape), list(op.strides)):
                raise ClaimEnded("rejected", f"the kernel's operand {j} is no longer its input {i} passed through "
                                             "(contiguous, on the CPU, of the same size): where it says it lives changed")
            try:
                write_remote(side.pid, op.ptr, kbuf.view)
            except ReadError as e2:
                raise ClaimEnded("error", f"could not write the changes into the kernel's operand {j}: {e2}") from None

    @property
    def unperturbed(self) -> str:
        """Why an input of the kernel's cannot change between its timed calls (its `prepare` passes
        none through unchanged, an integer input holds one value only, or the changes never move the
        reference's answer), or ""."""
        if self.constant:
            i = min(self.constant)
            return (f"input {i} holds one value only, so no change before a timed call can move it, and work that "
                    "depends on it alone could be kept from call to call; pass it as a number in workload.params, "
                    "or draw varied values in make_inputs")
        if self.unmoved:
            return ("the changes made before each timed call (their dense part, about half of every input's "
                    "elements) left the reference's answer exactly as it was (the task's answer does not see them), "
                    "so a kernel could keep its answer and update it where the few other changes fell; make the "
                    "answer depend on every input's values, or draw inputs the changes can move")
        if not self._prepared("kernel") or self.s.passthrough:
            return ""
        return ("the kernel's `prepare` passes none of its inputs through unchanged, so no timed call's inputs "
                "could change without its `prepare` seeing them (untimed, it could compute the answer); pass "
                "the per-call inputs (activations, queries) through `prepare` as they are")

    def _perturb(self) -> None:
        """Change every floating-point input (none: every integer one) for the next kernel sample, in both
        sides' copies (`perturb.perturbable`); for a kernel with `prepare`, only the inputs it passes through."""
        assert self.inputs is not None
        kbufs = self.s.operands["kernel"].buffers
        kprep = self._prepared("kernel")
        through = (self.s.passthrough or {}) if kprep else {}
        usable = [b is not None and bool(b.nbytes) and (not kprep or i in through) for i, b in enumerate(kbufs)]
        changed = perturbation.perturbable(self.inputs.items, usable)
        for i in changed:
            it, kbuf, pristine = self.inputs.items[i], kbufs[i], self.inputs.raw[i]
            assert isinstance(it, m.TensorItem) and kbuf is not None and pristine is not None
            if perturbation.constant(it, pristine):
                self.constant.add(i)
            cap = perturbation.spread_cap(codec.itemsize(it.dtype), len(changed), self.calls_per_round)
            edit = perturbation.plan_edit(i, it, kbuf.view, rng=self.rng, flip=True,  # drawn now: after the last call returned
                                          mantissa=not self._signed(i, it, pristine), cap=cap)
            # CPU: our own pages, the side takes no part (the baseline's get their own flip just before
            # its own sample, _flip_baseline); CUDA: ours mirror theirs, the next edit reads them
            perturbation.apply_to_bytes(kbuf.view, edit, codec.itemsize(it.dtype), dtype=it.dtype, row=_row(it))
            if self.device != "cpu":
                if not kprep:
                    self.pending["kernel"].append(edit)
                self.pending["baseline"].append(edit)
            if kprep:  # into the operand its `prepare` passed input i through to (our pages mirror it)
                self.operand_edits.append(edit.model_copy(update={"operand": through[i]}))
                self.operand_sources.append(i)
            self.edits.append(edit)
            self.perturbed += 1
            self.flipped += edit.signs is not None or edit.shift is not None
        self.stale |= {"baseline"} if self._prepared("baseline") and self.device != "cpu" else set()

    def _signed(self, i: int, it: m.TensorItem, pristine: np.ndarray) -> bool:
        """Whether input ``i`` holds a negative value this round (its signs flip, else its mantissas:
        signs.py), from its pristine bytes."""
        if i not in self.signed:
            self.signed[i] = perturbation.signed(it, pristine)
        return self.signed[i]

    def _flip_baseline(self) -> None:
        """CPU: a fresh dense change of the baseline's own pages just before each of its samples, as the
        kernel's get before each of theirs. Written at the kernel's turn, the baseline's inputs had
        long been written back by its sample while the kernel's were still dirty in the caches: the
        kernel alone paid for the write (cpu-softmax-fused-vs-naive: kernel 2.2 -> 3.9 ms, baseline
        5.0 ms both ways). Its outputs are not checked, so its values need not be the kernel's."""
        assert self.inputs is not None
        bbufs = self.s.operands["baseline"].buffers
        usable = [b is not None and bool(b.nbytes) for b in bbufs]
        for i in perturbation.perturbable(self.inputs.items, usable):
            it, buf, pristine = self.inputs.items[i], bbufs[i], self.inputs.raw[i]
            assert isinstance(it, m.TensorItem) and buf is not None and pristine is not None
            edit = perturbation.plan_edit(i, it, buf.view, rng=self.rng, flip=True, mantissa=not self._signed(i, it, pristine))
            perturbation.apply_to_bytes(buf.view, edit, codec.itemsize(it.dtype), dtype=it.dtype, row=_row(it))
            self.stale |= {"baseline"} if self._prepared("baseline") else set()

    def take_edits(self, side: str) -> list[m.Edit]:
        """The perturbations not yet sent to ``side``, handed over once: a CUDA side applies them itself."""
        out, self.pending[side] = self.pending[side], []
        return out

    def after_sample(self, side: str, r: int, out: Any) -> None:
        """Keeps a kernel sample's outputs as a candidate for the round's check (CPU: every one; CUDA: one a
        round, each sample of it equally likely), then releases the side's outputs.

        CUDA stages a sample's outputs only when it may be the one checked, so the k-th sample of a round
        replaces the candidate with probability 1/k (reservoir sampling): every round keeps exactly one,
        drawn uniformly. Before, each sample was kept with probability 1/calls_per_round, so a round could
        keep none, and a three-round run checked nothing about 3.5% of the time (an adversarial review)."""
        if side == "kernel" and isinstance(out, m.Called):
            if self.device == "cpu":  # every output is read: the kernel cannot know which one counts
                raws = [self.s.output_raw("kernel", i, b) for i, b in enumerate(out.outputs)]
                self.candidates.append((raws, list(self.edits), list(out.outputs)))
            else:
                self.seen_in_round += 1
                if self.coord.broadcast(self.rng.random() * self.seen_in_round < 1.0):
                    staged = self.s.exchange("kernel", m.Emit(), expect=m.Outputs)[0].outputs
                    raws = [self.s.output_raw("kernel", i, b) for i, b in enumerate(staged)]
                    self.candidates = [(raws, list(self.edits), list(staged))]
        self.s.release(side)
        self.timer.unreleased.discard(side)

    def finish_round(self) -> None:
        """Draws one candidate of the round, after its calls returned, and checks it against a fresh reference
        with that sample's edits. A mismatch ends the claim `rejected` at once: one wrong timed answer already
        decides the verdict, so more rounds and processes would only spend the machine's time (on a GPU, the
        full-size rounds) to say the same."""
        self.seen_in_round = 0
        if self.inputs is None or not self.candidates:
            self.candidates = []
            return
        pick = self.coord.broadcast(self.rng.randrange(len(self.candidates)))  # drawn after the calls returned
        raws, edits, bufs = self.candidates[min(pick, len(self.candidates) - 1)]
        self.candidates = []
        ref = self.s.reference(self.inputs, edits)
        if self.unmoved is None and edits:  # once: does the dense change alone reach the answer at all?
            # the sparse part writes every row and column, so it moves a matmul's whole answer even where
            # the work that follows its few elements is small: the dense part (half of every element) must
            # move the answer by itself (an answer from binary exponents saw neither a sign nor a mantissa
            # bit, and a kept one updated where the sparse part wrote was verified at 2.67x)
            dense = [e.model_copy(update={"indices": "", "raw": ""}) for e in edits if e.signs is not None or e.shift is not None]
            before = self.s.reference(self.inputs, [])
            after = self.s.reference(self.inputs, dense) if dense else ref
            self.unmoved = len(before) == len(after) and all(
                a.shape == b.shape and a.tobytes() == b.tobytes() for a, b in zip(before, after))
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


def _row(it: m.TensorItem) -> int:
    """An input's last dimension: the rows a shift keeps in order (signs.shift_sorted)."""
    return int(it.shape[-1]) if it.shape else 1
