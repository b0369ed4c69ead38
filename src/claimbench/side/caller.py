"""The kernel side and the baseline side: one process each, running one function on operands.

The process imports only its own side's modules. Its operands come from memfds: on CPU they are
views of pages the orchestrator owns and writes (new contents each round, one changed element
before each sample), so the side takes no part in changing them; on CUDA they are device copies
refreshed on request. After every call the outputs are checked for what they are (plain tensors,
no modes left behind) and their location is reported; the orchestrator reads the bytes itself.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Optional

import torch

from claimbench.orchestrator import messages as m
from claimbench.side import tensors
from claimbench.side.calls import ClaimCodeError, call_claim_code, mode_depths, normalize_outputs

_NOW = time.perf_counter_ns  # bound before any claim module is imported


class CallerSide:
    """The kernel or baseline side: its `impl` and `prepare`, the operands it was given, its last outputs
    (poisoned on release), and its CUDA timer when the orchestrator sent a TimerSpec."""

    def __init__(self, load: Callable[[str, str], Callable], msg: m.Load) -> None:
        self.role, self.device = msg.role, msg.device
        self.key = f"{msg.role}.impl"
        self.depths = mode_depths()  # before any claim code runs: no mode of its own may stay active
        self.fn = load(self.key, msg.refs[self.key])
        prep = msg.refs.get(f"{msg.role}.prepare")
        self.prepare = load(f"{msg.role}.prepare", prep) if prep else None
        self.forbidden = list(msg.forbidden)
        self.baseline_code = None
        if msg.role == "kernel" and "baseline.impl" in msg.refs:
            self.baseline_code = getattr(load("baseline.impl", msg.refs["baseline.impl"]), "__code__", None)
        self.mapped: list[Optional[tensors.Mapped]] = []
        self.inputs: tuple = ()
        self.operands: tuple = ()
        self.last: tuple = ()
        self.null_out: tuple = ()  # copies of a real call's outputs, returned by null calls
        self.last_null = False
        self.kept: list = []  # host copies handed to the orchestrator, freed at the next release
        self.timer = None
        if msg.device == "cuda" and msg.timer is not None:
            from claimbench.side.cuda import make_timer
            self.timer = make_timer(msg.timer)
        torch.backends.cuda.matmul.allow_tf32 = msg.dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = msg.dtype == "tf32"

    def handle(self, msg: Any, fds: list[int]) -> tuple[m.Message, list[int]]:
        """One request answered, with no fds back; a message a calling side does not take raises TypeError,
        which `serve` returns as Failed."""
        if isinstance(msg, m.Operands):
            return self._operands(msg, fds), []
        if isinstance(msg, m.Refill) and msg.operands:
            self._edit_operands(msg.edits)
            return m.Done(), []
        if isinstance(msg, m.Refill):
            self._refill(msg.edits)
            return m.Done(), []
        if isinstance(msg, m.Call):
            return self._call(msg), []
        if isinstance(msg, m.Emit):
            return m.Outputs(outputs=[self._readable(t) for t in self.last]), []
        if isinstance(msg, m.ShowOperands):
            return m.Prepared(operands=[self._readable(t) if isinstance(t, torch.Tensor) else None
                                        for t in self.operands]), []
        if isinstance(msg, m.Release):
            self._release()
            return m.Done(), []
        if isinstance(msg, m.Probe):
            f, d = mode_depths()
            return m.Probed(torch_threads=torch.get_num_threads(), interop_threads=torch.get_num_interop_threads(),
                            function_modes=f, dispatch_modes=d, autotune=_autotune_choices()), []
        if isinstance(msg, m.StreamCheck):
            from claimbench.side.cuda_timer import check_streams
            ok, why = check_streams(lambda: call_claim_code(self.key, self.fn, self.operands, kwargs={}))
            return m.StreamChecked(ok=ok, why=why), []
        raise TypeError(f"the {self.role} side does not take {msg.kind!r}")

    # -- operands ---------------------------------------------------------------------------
    def _operands(self, msg: m.Operands, fds: list[int]) -> m.Prepared:
        self._release()
        self.mapped = []
        ins: list[Any] = []  # tensors and plain scalars, as the claim's code takes them
        for item in msg.items:
            if isinstance(item, m.ScalarItem):
                self.mapped.append(None)
                ins.append(item.value)
                continue
            mp = tensors.Mapped(fds[item.fd], item)
            self.mapped.append(mp)
            ins.append(mp.tensor if self.device == "cpu" else torch.Tensor.to(mp.tensor, "cuda"))
        for fd in fds:
            os.close(fd)
        self.inputs = tuple(ins)
        self.operands = self._derive()
        self._sync()
        return m.Prepared(operands=[tensors.buffer(t) if isinstance(t, torch.Tensor) else None for t in self.operands])

    def _derive(self) -> tuple:
        if self.prepare is None:
            return self.inputs
        clones = tuple(torch.Tensor.clone(x) if isinstance(x, torch.Tensor) else x for x in self.inputs)
        got = call_claim_code(f"{self.role}.prepare", self.prepare, clones, kwargs={})
        ops = tuple(got) if type(got) in (tuple, list) else (got,)
        for i, t in enumerate(ops):  # a subclass or an instance attribute runs its code when the harness writes into it
            if isinstance(t, torch.Tensor) and (type(t) is not torch.Tensor or object.__getattribute__(t, "__dict__")):
                raise ClaimCodeError(f"{self.role}.prepare", f"{self.role}.prepare: operand {i} is a "
                                     f"{type(t).__qualname__} or carries attributes, not a plain torch.Tensor",
                                     verdict="rejected")
        self._modes_unchanged(f"{self.role}.prepare")
        return ops

    def _modes_unchanged(self, key: str) -> None:
        """Claim code left no torch function or dispatch mode active (one would see what the harness
        does in this process between calls: the edits written into the operands)."""
        if mode_depths() != self.depths:
            raise ClaimCodeError(key, f"{key} left a torch function or dispatch mode active (stacks {self.depths} "
                                 f"when the side started, {mode_depths()} now)", verdict="rejected")

    def _refill(self, edits: list) -> None:
        """New contents in the memfds (copy them in), or a perturbation to apply to the device
        inputs; then re-derive, keeping every address."""
        if edits:
            for e in edits:
                tensors.set_elements(self.inputs[e.operand], e)
        elif self.device == "cuda":
            for dst, mp in zip(self.inputs, self.mapped):
                if mp is not None:
                    torch.Tensor.copy_(dst, mp.tensor)
        if self.prepare is not None:
            for dst, src in zip(self.operands, self._derive()):
                if isinstance(dst, torch.Tensor):
                    with torch.no_grad():
                        torch.Tensor.copy_(dst, src)
        self._sync()

    def _edit_operands(self, edits: list) -> None:
        """The perturbation written into prepared operands that are inputs passed through (no derivation:
        `prepare` must not see a timed call's inputs)."""
        self._modes_unchanged(self.key)
        for e in edits:
            t = self.operands[e.operand] if 0 <= e.operand < len(self.operands) else None
            if not isinstance(t, torch.Tensor) or type(t) is not torch.Tensor or not torch.Tensor.is_contiguous(t):
                raise TypeError(f"operand {e.operand} is not a contiguous tensor the edit can go into")
            with torch.no_grad():
                tensors.set_elements(t, e)
        self._sync()

    # -- calls -----------------------------------------------------------------------------
    def _call(self, msg: m.Call) -> m.Called:
        self._release()
        self._modes_unchanged(self.key)  # one left by an import would see CUDA's edits applied below, untimed
        if msg.edits and self.prepare is not None:
            raise TypeError("a side with prepare takes its perturbation with Refill, so prepare sees it")
        for e in msg.edits:  # CUDA: the orchestrator cannot write device memory; CPU edits are its own
            tensors.set_elements(self.operands[e.operand], e)
        ops = self._variant(msg.variant) if msg.variant else self.operands
        fn = self.fn
        if msg.null:
            null_out = self.null_out

            def fn(*_a):
                return null_out
        depths = mode_depths()
        ops_seen: list[str] = []
        problems: list[str] = []
        event_us = reasons = clock = None
        synced = False
        if msg.timed == "cuda":
            assert self.timer is not None  # the orchestrator times on CUDA only after sending a TimerSpec
            self.timer.calls_per_block[self.role] = msg.n
            s = self.timer.sample(self.role, lambda: call_claim_code(self.key, fn, ops, kwargs={}))
            out, event_us, reasons, clock = s.out, s.us, s.throttle_reasons, s.sm_clock_mhz
            synced = self.role in self.timer.syncs
            side_us = event_us * s.calls
        elif msg.trace:
            from claimbench.side.trace import traced_call
            t0 = _NOW()
            out, problems, ops_seen = traced_call(lambda: call_claim_code(self.key, self.fn, ops, kwargs={}),
                                                  forbidden=self.forbidden, baseline_code=self.baseline_code)
            self._sync()
            side_us = (_NOW() - t0) / 1000.0
        else:
            t0 = _NOW()
            out = None
            for _ in range(msg.n):
                out = call_claim_code(self.key, fn, ops, kwargs={})
            self._sync()
            side_us = (_NOW() - t0) / 1000.0 / msg.n
        if mode_depths() != depths:
            raise ClaimCodeError(self.key, f"{self.key} left a torch function or dispatch mode active after "
                                 f"returning (stacks {depths} before, {mode_depths()} after)", verdict="rejected")
        self.last = normalize_outputs(out, self.key)
        self.last_null = msg.null
        if not self.null_out and not msg.null:
            self.null_out = tuple(torch.Tensor.clone(t) for t in self.last)
        return m.Called(outputs=[tensors.buffer(t) for t in self.last], side_us=side_us, event_us=event_us,
                        throttle_reasons=reasons, sm_clock_mhz=clock, synced=synced, ops=ops_seen[:500],
                        problems=[p[:2000] for p in problems[:50]])

    def _variant(self, v: m.Variant) -> tuple:
        first = self.operands[0] if self.operands else None
        if not isinstance(first, torch.Tensor) or first.dim() < 1:
            raise ClaimCodeError("correctness.properties", "batch-invariant needs a tensor batch as the first operand",
                                 verdict="incorrect")
        if v.roll:
            n = first.shape[0]
            perm = torch.roll(torch.arange(n), 1).to(first.device)
            return (torch.Tensor.contiguous(first[perm]),) + tuple(self.operands[1:])
        i = int(v.row or 0)
        return (torch.Tensor.contiguous(first[i:i + 1]),) + tuple(self.operands[1:])

    def _readable(self, t: torch.Tensor) -> m.Buffer:
        if t.device.type == "cpu":
            return tensors.buffer(t)
        host = tensors.stage(t)
        torch.cuda.synchronize()
        self.kept.append(host)
        return tensors.buffer(host, staged=True)

    def _release(self) -> None:
        if not self.last_null:
            tensors.poison(self.last)
        self.last = ()
        self.kept = []

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()


def _autotune_choices() -> dict:
    """The configs Triton's autotuners picked, keyed by kernel: part of the protocol record."""
    import sys

    out = {}
    for mod in list(sys.modules.values()):
        if not (getattr(mod, "__name__", "") or "").startswith("kernels"):
            continue
        for name, obj in list(vars(mod).items()):
            cache = getattr(obj, "cache", None)
            if type(obj).__name__ == "Autotuner" and isinstance(cache, dict) and cache:
                out[f"{mod.__name__}.{name}"] = {str(k)[:200]: str(v)[:200] for k, v in list(cache.items())[:8]}
    return out
