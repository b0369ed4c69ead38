"""Runtime guards: what the kernel actually did, whatever its source text says.

A dispatch trace (``TorchDispatchMode``) sees every aten op, so a forbidden op reached through
``getattr``, ``torch.ops`` or an alias is still seen. A profile hook sees Python-level calls of
the baseline. Identity snapshots show whether timers, torch or the baseline were patched, and a
thread census shows work left running after the kernel returned.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any, Callable, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

OP_ALIASES = {
    "matmul": {"mm", "bmm", "addmm", "matmul", "baddbmm", "addbmm", "_addmm_activation", "linear", "dot", "mv", "addmv"},
    "mm": {"mm", "addmm", "matmul"},
    "scaled_dot_product_attention": {"_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
                                     "_scaled_dot_product_attention_math", "scaled_dot_product_attention",
                                     "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_cudnn_attention"},
    "softmax": {"softmax", "_softmax", "_safe_softmax"},
    "log_softmax": {"log_softmax", "_log_softmax"},
    "cumsum": {"cumsum", "_cumsum"},
    "sum": {"sum"},
    "clone": {"clone"},
}


def forbidden_ops(names: Iterable[str]) -> set[str]:
    """aten op names (overload packets, leading underscores kept) a forbidden name stands for."""
    ops: set[str] = set()
    for n in names:
        last = n.split(".")[-1]
        ops |= OP_ALIASES.get(last, {last, "_" + last})
    return ops


def resolve(dotted: str) -> Any:
    """The object a dotted name names in this process, or None."""
    parts = dotted.split(".")
    try:
        obj = __import__(parts[0])
    except ImportError:
        return None
    for p in parts[1:]:
        obj = getattr(obj, p, None)
        if obj is None:
            return None
    return obj


class _OpRecorder(TorchDispatchMode):
    """Records the overload packet of every aten op that reaches the dispatcher."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would wrap __torch_dispatch__ in a dynamo-disable shim whose first call imports
        # torch._dynamo: a second per claim process, for a frame dynamo never compiles (it does
        # not compile under a dispatch mode). Once a kernel imported dynamo, _DynamoSafeRecorder.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func))
        return func(*args, **(kwargs or {}))


class _DynamoSafeRecorder(_OpRecorder):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # wrapped by torch on class creation
        return super().__torch_dispatch__(func, types, args, kwargs)


def _recorder() -> _OpRecorder:
    return _DynamoSafeRecorder() if "torch._dynamo" in sys.modules else _OpRecorder()


def traced_call(fn: Callable, args: tuple, *, forbidden: Iterable[str], baseline: Callable) -> tuple[Any, list[str], list[str]]:
    """Call ``fn(*args)`` once under the dispatch trace and a profile hook.

    Returns (output, problems, ops seen). Problems name what the claim forbids.
    """
    forbidden = list(forbidden)
    bad_ops = forbidden_ops(forbidden)
    bad_objs = {id(o): n for n in forbidden if (o := resolve(n)) is not None}
    base_code = getattr(baseline, "__code__", None)
    hits: list[str] = []

    def hook(frame, event, arg):
        if event == "call" and base_code is not None and frame.f_code is base_code:
            hits.append(f"called the baseline's own function `{baseline.__name__}` at run time")
        elif event == "c_call" and id(arg) in bad_objs:
            hits.append(f"called forbidden `{bad_objs[id(arg)]}` at run time")

    before = set(threading.enumerate())
    rec = _recorder()
    old = sys.getprofile()
    try:
        with rec:
            sys.setprofile(hook)
            try:
                out = fn(*args)
            finally:
                sys.setprofile(old)
    finally:
        pass
    problems = sorted(set(hits))
    seen = sorted(rec.ops)
    for op in seen:
        if op in bad_ops:
            problems.append(f"ran forbidden op aten::{op} (dispatch trace)")
    problems.extend(new_threads(before))
    return out, problems, seen


def new_threads(before: set, grace_s: float = 0.05) -> list[str]:
    deadline = time.monotonic() + grace_s
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return [f"left thread {t.name!r} running after returning" for t in extra]


def prime() -> None:
    """Enter the dispatch machinery once before the snapshot, so its lazy set-up does not
    happen during the kernel. (Importing torch._dynamo, which a kernel using torch.compile
    does, rebinds ``torch.manual_seed``; ``Snapshot.changed`` knows that rebinding.)"""
    with _recorder():
        torch.ones(2).add(1)


def _dynamo_disabled(now: Any, orig: Any) -> bool:
    """True when ``now`` is torch's own dynamo-disable shim around ``orig``, the rebinding that
    importing torch._dynamo makes: it calls ``orig`` unchanged, with compilation switched off."""
    if "torch._dynamo" not in sys.modules or not callable(orig):
        return False
    shim = getattr(torch, "_disable_dynamo", None)
    code = getattr(now, "__code__", None)
    if shim is None or code is None or code is not getattr(shim(_noop), "__code__", None):
        return False
    cells = [c.cell_contents for c in (getattr(now, "__closure__", None) or ()) if _filled(c)]
    return any(c is orig for c in cells)


def _noop() -> None:
    pass


def _filled(cell) -> bool:
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


class Snapshot:
    """Identities of the objects a cheat would patch: timers, torch's namespaces, the baseline."""

    def __init__(self, extra: dict[str, Any] | None = None) -> None:
        self.items: dict[str, Any] = {}
        spaces = {"time": time, "torch": torch, "torch.nn.functional": torch.nn.functional,
                  "torch.Tensor": torch.Tensor, "torch.cuda": torch.cuda, "torch.linalg": torch.linalg}
        for prefix, space in spaces.items():
            for k, v in list(vars(space).items()):
                if callable(v) or isinstance(v, (staticmethod, classmethod, property)):
                    self.items[f"{prefix}.{k}"] = v
        for k, v in (extra or {}).items():
            self.items[k] = v

    def add(self, name: str, obj: Any) -> None:
        self.items[name] = obj

    def changed(self, resolver: Callable[[str], Any] | None = None) -> list[str]:
        resolver = resolver or _current
        out = []
        for name, obj in self.items.items():
            now = resolver(name)
            if now is not obj and not _dynamo_disabled(now, obj):
                out.append(name)
        return out


def _current(name: str) -> Any:
    spaces = {"time": time, "torch": torch, "torch.nn.functional": torch.nn.functional,
              "torch.Tensor": torch.Tensor, "torch.cuda": torch.cuda, "torch.linalg": torch.linalg}
    prefix, _, attr = name.rpartition(".")
    space = spaces.get(prefix)
    if space is None:
        return _MISSING
    return vars(space).get(attr, _MISSING)


_MISSING = object()
