"""The orchestrator's handle on one claim's processes: exchanges, input sets, reads.

Every exchange thaws one side, sends one message, waits for one reply and stops the side again,
so at any moment at most one of the claim's processes runs. Inputs come from the task side as
memfds; the orchestrator keeps a pristine copy and gives each side memfds of its own, so it can
rewrite their contents between rounds and change one element between samples by itself.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np

from claimbench.orchestrator import census
from claimbench.orchestrator import messages as m
from claimbench.orchestrator.channel import SideFailed
from claimbench.orchestrator.memory import OwnedBuffer, map_readonly, misplaced, read_buffer, read_remote
from claimbench.orchestrator.processes import ForkServer, SideProcess
from claimbench.verify import codec


class ClaimEnded(Exception):
    """The claim cannot go on; `verdict` is the outcome (error, timeout, incorrect, rejected)."""

    def __init__(self, verdict: str, reason: str) -> None:
        super().__init__(reason)
        self.verdict, self.reason = verdict, reason


@dataclass
class InputSet:
    """Inputs the task side made: its id there, what each item is, and our pristine bytes."""

    set_id: int
    items: list
    raw: list[Optional[np.ndarray]]

    def nbytes(self) -> int:
        """Bytes of the set's tensors (scalars count none); orchestrate adds the outputs' for `tensor_bytes`."""
        return sum(r.size for r in self.raw if r is not None)


@dataclass
class OwnedOperands:
    """One side's memfds (ours), the items describing them, and what the side made of them: the
    orchestrator's end of what it sent in the `messages.Operands` message."""

    buffers: list[Optional[OwnedBuffer]]
    items: list
    prepared: list = field(default_factory=list)

    def close(self) -> None:
        """Closes our memfds: when the side is given new operands, and when the session closes."""
        for b in self.buffers:
            if b is not None:
                b.close()


class ClaimSession:
    """One claim's sides by role (task, kernel, baseline; orchestrate starts them) and the operands given
    to each, under one deadline. Every request to a side goes through `exchange`."""

    def __init__(self, server: ForkServer, deadline: float) -> None:
        self.server, self.deadline = server, deadline
        self.sides: dict[str, SideProcess] = {}
        self.pinned_cpus: Optional[frozenset[int]] = None  # kernel's and baseline's CPUs (`--threads`); None: all
        self.operands: dict[str, OwnedOperands] = {}
        # input index -> the kernel operand its `prepare` passes it through to, unchanged, in every trial
        # at the claim's own params (trials.py); None until one ran. Only those inputs change between
        # timed calls of a kernel with `prepare` (rechecks.py).
        self.passthrough: Optional[dict[int, int]] = None

    # -- exchanges -------------------------------------------------------------------------
    def left(self) -> float:
        """Seconds to the claim's deadline, which bounds every wait; raises ClaimEnded("timeout") once past."""
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise ClaimEnded("timeout", "the claim's time limit ran out")
        return left

    def exchange(self, role: str, msg: m.Message, *, expect: type, fds: tuple[int, ...] = ()):
        """One request to ``role`` and its ``expect`` reply as (reply, fds), the side thawed only meanwhile;
        a Failed reply ends the claim with the side's verdict."""
        side = self.sides[role]
        side.thaw()
        try:
            return side.channel.request(msg, expect, fds=fds, timeout_s=self.left())
        except SideFailed as e:
            f = e.failed
            raise ClaimEnded(f.verdict, f.message) from None
        finally:
            side.freeze()

    def read(self, role: str, buf: m.Buffer) -> np.ndarray:
        """Decoded numbers of a reported tensor, read while the side is stopped."""
        side = self.sides[role]
        if not side.wait_stopped():
            raise ClaimEnded("error", f"the {role} side did not stop when told to")
        return read_buffer(side.pid, buf)

    def read_raw(self, role: str, buf: m.Buffer) -> np.ndarray:
        """The undecoded bytes a reported buffer spans (from dtype, shape and strides), read while the side is
        stopped: for bytewise comparisons and for outputs decoded later."""
        side = self.sides[role]
        if not side.wait_stopped():
            raise ClaimEnded("error", f"the {role} side did not stop when told to")
        return read_remote(side.pid, buf.ptr, codec.span_bytes(buf.dtype, buf.shape, buf.strides))

    # -- the task side -----------------------------------------------------------------------
    def make_inputs(self, seed: int, params: dict) -> InputSet:
        """A new input set from the task side's `workload.inputs`; we keep private copies of its bytes, and
        the task side keeps the set itself until `drop`."""
        reply, fds = self.exchange("task", m.MakeInputs(seed=seed, params=params), expect=m.Inputs)
        try:
            raw = [map_readonly(fds[it.fd], it.nbytes) if isinstance(it, m.TensorItem) else None for it in reply.items]
        finally:
            for fd in fds:
                os.close(fd)
        return InputSet(reply.set_id, list(reply.items), raw)

    def reference(self, inputs: InputSet, edits: Sequence[m.Edit] = ()) -> list[np.ndarray]:
        """The task side's float64 reference for ``inputs`` with ``edits`` applied in order (a timed sample's
        perturbations); anything but float64 tensors ends the claim as an error."""
        reply, fds = self.exchange("task", m.Reference(set_id=inputs.set_id, edits=list(edits)), expect=m.Arrays)
        try:
            out = []
            for it in reply.items:
                if not isinstance(it, m.TensorItem) or it.dtype != "float64":
                    raise ClaimEnded("error", "correctness.reference must return float64 tensors")
                out.append(codec.from_bytes(map_readonly(fds[it.fd], it.nbytes), "float64", it.shape))
            return out
        finally:
            for fd in fds:
                os.close(fd)

    def drop(self, inputs: InputSet) -> None:
        """Lets the task side forget an input set; our copies in ``inputs`` stay usable."""
        self.exchange("task", m.Drop(set_id=inputs.set_id), expect=m.Done)

    # -- the calling sides -------------------------------------------------------------------
    def give(self, role: str, inputs: InputSet) -> OwnedOperands:
        """Fresh memfds holding a copy of ``inputs``, handed to ``role``, which prepares its operands."""
        old = self.operands.pop(role, None)
        buffers: list[Optional[OwnedBuffer]] = []
        items: list = []
        for it, raw in zip(inputs.items, inputs.raw):
            if isinstance(it, m.TensorItem):
                b = OwnedBuffer(it.nbytes)
                assert raw is not None          # make_inputs maps every tensor item's bytes
                b.view[:] = raw
                items.append(m.TensorItem(dtype=it.dtype, shape=it.shape, nbytes=it.nbytes,
                                          fd=sum(x is not None for x in buffers)))
                buffers.append(b)
            else:
                buffers.append(None)
                items.append(it)
        ops = OwnedOperands(buffers, items)
        fds = tuple(b.fd for b in buffers if b is not None)
        reply, _ = self.exchange(role, m.Operands(items=items), expect=m.Prepared, fds=fds)
        ops.prepared = list(reply.operands)
        self.operands[role] = ops
        if old is not None:
            old.close()
        return ops

    def call(self, role: str, msg: m.Call) -> m.Called:
        """One call of ``role`` on the operands it was given, as ``msg`` asks; its outputs stay alive on the
        side until `release` or the next call."""
        reply, _ = self.exchange(role, msg, expect=m.Called)
        return reply

    def outputs(self, role: str, called: m.Called) -> list[np.ndarray]:
        """The numbers of a call's outputs: read directly (CPU) or from the side's staged copies."""
        bufs = called.outputs
        if any(b.device != "cpu" for b in bufs):
            bufs = self.exchange(role, m.Emit(), expect=m.Outputs)[0].outputs
        return [self.read(role, self.placed(role, i, b)) for i, b in enumerate(bufs)]

    def output_raw(self, role: str, i: int, buf: m.Buffer) -> np.ndarray:
        """The bytes of output ``i`` as the timed rechecks keep them, placed as `outputs` places them."""
        return self.read_raw(role, self.placed(role, i, buf))

    def placed(self, role: str, i: int, buf: m.Buffer) -> m.Buffer:
        """``buf`` once its location is confirmed from outside the kernel's process.

        The report is written in the kernel's process, which can rewrite it (or relay its channel), so
        it is evidence of nothing: the span is recomputed from the shape and strides the bytes are
        decoded with, and checked against the process's memory map as the OS keeps it. An output in
        the operand pages is a view of the inputs, whatever storage range the reply states."""
        if role != "kernel":
            return buf
        side = self.sides[role]
        if not side.wait_stopped():
            raise ClaimEnded("error", f"the {role} side did not stop when told to")
        span = codec.span_bytes(buf.dtype, buf.shape, buf.strides)
        try:
            why = misplaced(side.pid, buf.ptr, span)
        except OSError as e:
            raise ClaimEnded("error", f"could not read the kernel side's memory map: {e}") from None
        if why:
            raise ClaimEnded("rejected", f"the kernel's output {i} {why}; outputs must be tensors the kernel "
                             "allocated, reported where they are")
        return buf

    def release(self, role: str) -> None:
        """Has ``role`` poison and free its last outputs, so memory handed out again holds no answer."""
        self.exchange(role, m.Release(), expect=m.Done)

    def probe(self, role: str) -> m.Probed:
        """What ``role`` says of itself now (thread settings, active torch modes, autotune picks): evidence only."""
        return self.exchange(role, m.Probe(), expect=m.Probed)[0]

    def members(self) -> dict[str, list[int]]:
        """Each role's processes now, its process group and descendants, as /proc shows them."""
        table = census.all_stats()  # one look at /proc for every side
        return {role: side.refresh(table) for role, side in self.sides.items()}

    def close(self) -> None:
        """Operand memory and every side's channel: a session of 35 claims must not leak 105 sockets."""
        for ops in self.operands.values():
            ops.close()
        self.operands.clear()
        for side in self.sides.values():
            side.channel.close()


def total_cpu_s(pids: list[int]) -> float:
    """User plus system seconds these processes used, all threads counted (census.cpu_seconds)."""
    return census.cpu_seconds(pids)
