"""The task side: makes the inputs and computes the float64 reference, where no kernel code runs.

It imports only the claim's task modules (`workload.inputs`, `correctness.reference`, and the
baseline when the reference is `baseline-float64`); `check` refuses a claim whose task modules
import the kernel's. It keeps every input set it made, pristine, so a reference for any timed
sample can be computed from the set plus the edits the orchestrator applied to that sample.
"""

from __future__ import annotations

import os
from typing import Any, Callable, Optional

import torch

from claimbench.orchestrator import messages as m
from claimbench.side import tensors
from claimbench.side.calls import call_claim_code, normalize_outputs


class TaskSide:
    """The task side: `workload.inputs` and the reference (or the baseline, on float64), and every input
    set it made, pristine, by id until dropped."""

    def __init__(self, load: Callable[[str, str], Callable], msg: m.Load) -> None:
        refs = msg.refs
        self.device, self.dtype = msg.device, msg.dtype
        self.make_inputs = load("workload.inputs", refs["workload.inputs"])
        self.reference: Optional[Callable] = None
        self.baseline: Optional[Callable] = None
        self.bprep: Optional[Callable] = None
        if "correctness.reference" in refs:
            self.reference = load("correctness.reference", refs["correctness.reference"])
        else:  # baseline-float64: the baseline itself, on float64 operands
            self.baseline = load("baseline.impl", refs["baseline.impl"])
            if "baseline.prepare" in refs:
                self.bprep = load("baseline.prepare", refs["baseline.prepare"])
        self.sets: dict[int, tuple] = {}
        self.next_id = 0

    def handle(self, msg: Any, fds: list[int]) -> tuple[m.Message, list[int]]:
        """MakeInputs, Reference or Drop answered; the reply's memfds are closed by `serve` once sent."""
        if isinstance(msg, m.MakeInputs):
            return self._make(msg)
        if isinstance(msg, m.Reference):
            return self._reference(msg)
        if isinstance(msg, m.Drop):
            self.sets.pop(msg.set_id, None)
            return m.Done(), []
        raise TypeError(f"the task side does not take {msg.kind!r}")

    def _make(self, msg: m.MakeInputs) -> tuple[m.Message, list[int]]:
        got = call_claim_code("workload.inputs", self.make_inputs, (),
                              kwargs=dict(seed=msg.seed, device=self.device, dtype=self.dtype, **msg.params))
        items = tuple(got) if type(got) in (tuple, list) else (got,)
        for i, x in enumerate(items):
            if isinstance(x, torch.Tensor) and type(x) is not torch.Tensor:
                raise TypeError(f"make_inputs returned a {type(x).__name__} at position {i}; return plain tensors")
        self._sync()
        set_id, self.next_id = self.next_id, self.next_id + 1
        self.sets[set_id] = items
        return self._pack(items, set_id)

    def _reference(self, msg: m.Reference) -> tuple[m.Message, list[int]]:
        pristine = self.sets[msg.set_id]
        # C-order copies, as the sides hold them (tensors.to_memfd): a transposed input's clone kept its
        # strides, the edits went into a reshaped copy, and the reference saw no change at all
        ins = tuple(torch.Tensor.clone(x, memory_format=torch.contiguous_format) if isinstance(x, torch.Tensor) else x
                    for x in pristine)
        for e in msg.edits:  # in order: a later sample's edit may change an element again
            tensors.set_elements(ins[e.operand], e)
        if self.reference is not None:
            out = call_claim_code("correctness.reference", self.reference, ins, kwargs={})
        else:
            assert self.baseline is not None  # loaded whenever there is no reference
            ops = call_claim_code("baseline.prepare", self.bprep, ins, kwargs={}) if self.bprep else ins
            ops = ops if type(ops) in (tuple, list) else (ops,)
            ops = tuple(o.to(torch.float64) if isinstance(o, torch.Tensor) and o.is_floating_point() else o for o in ops)
            out = call_claim_code("baseline.impl", self.baseline, ops, kwargs={})
        outs = normalize_outputs(out, "correctness.reference")
        self._sync()
        host = tuple(torch.Tensor.to(t, "cpu", torch.float64) for t in outs)
        return self._pack(host, None)

    def _pack(self, items: tuple, set_id: Optional[int]) -> tuple[m.Message, list[int]]:
        fds: list[int] = []
        out: list[m.TensorItem | m.ScalarItem] = []
        try:
            for x in items:
                if isinstance(x, torch.Tensor):
                    fd, item = tensors.to_memfd(x, len(fds))
                    fds.append(fd)
                    out.append(item)
                elif x is None or isinstance(x, (bool, int, float, str)):
                    out.append(m.ScalarItem(value=x))
                else:
                    raise TypeError(f"an input of type {type(x).__name__}: inputs are tensors and plain numbers")
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        reply = m.Inputs(set_id=set_id, items=out) if set_id is not None else m.Arrays(items=out)
        return reply, fds

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()
