"""The dispatch trace of one correctness call: which aten ops the kernel really ran.

A `TorchDispatchMode` sees every aten op, so a forbidden op reached through `getattr`, `torch.ops`
or an alias is still seen; a profile hook sees calls of the baseline's own function. This runs in
the kernel's process and is evidence of what the kernel did when watched. A kernel that behaves
differently when unwatched gains nothing from it: what decides the verdict is checked outside,
on outputs the kernel cannot tell apart from the traced one's.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import Any, Callable, Iterable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from claimbench.spec import ops


def forbidden_ops(names: Iterable[str]) -> set[str]:
    """aten op names (overload packets, leading underscores kept) the forbidden names stand for."""
    return {op for n in names for op in ops.group(n)}


def resolve(dotted: str) -> Any:
    """The object a dotted name names in this process, or None."""
    parts = dotted.split(".")
    obj = sys.modules.get(parts[0])
    for p in parts[1:]:
        obj = getattr(obj, p, None) if obj is not None else None
    return obj


class _OpRecorder(TorchDispatchMode):
    """Records the overload packet of every aten op that reaches the dispatcher."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        # torch would wrap __torch_dispatch__ in a dynamo-disable shim whose first call imports
        # torch._dynamo, a second per claim process, for a frame dynamo never compiles.
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: PLR0917 (torch's dispatch protocol)
        self.ops.add(func._overloadpacket.__name__ if hasattr(func, "_overloadpacket") else str(func))
        return func(*args, **(kwargs or {}))


class _DynamoSafeRecorder(_OpRecorder):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return True

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: PLR0917 (torch's dispatch protocol); wrapped by torch on class creation
        return super().__torch_dispatch__(func, types, args, kwargs)


def _recorder() -> _OpRecorder:
    if "torch._dynamo" in sys.modules:
        return _DynamoSafeRecorder()
    _never_compiled(_OpRecorder.__torch_dispatch__.__code__)
    return _OpRecorder()


def _never_compiled(code: Any) -> None:
    """Dynamo, imported during the traced call (a kernel calling `torch.compile` at its first call), skips
    the kernel's frame under a dispatch mode and then compiled each of this recorder's dispatches instead,
    one graph per aten op: five C++ compiles, 12 s of a softmax's first call. Marked in C, skipped with
    every frame it calls, without importing torch._dynamo (a second per side). A torch without the mark
    compiles the recorder: slower, and what it records is the same."""
    try:
        from torch._C._dynamo import eval_frame
    except ImportError:  # a torch built without Dynamo compiles nothing
        return
    mark = getattr(eval_frame, "set_code_exec_strategy", None)
    strategy, action = getattr(eval_frame, "_FrameExecStrategy", None), getattr(eval_frame, "_FrameAction", None)
    if mark is not None and strategy is not None and action is not None:
        mark(code, strategy(action.SKIP, action.SKIP))


@contextlib.contextmanager
def _dynamo_left_as_found() -> Iterator[None]:
    """The traced call leaves Dynamo as it found it. Under a dispatch mode Dynamo does not compile: it
    runs the kernel's frame eagerly and marks that code never to be compiled again, so a kernel that
    calls `torch.compile` ran eagerly in every timed call after its traced one (a softmax: 0.076 s a
    call at 2048x4096, its eager time, and no compile at any new shape). With Dynamo imported, its
    `force_eager` stance runs the call eagerly without marking anything; imported during the call, the
    marks are cleared after (`torch.compiler.reset`: nothing was compiled before it)."""
    imported = "torch._dynamo" in sys.modules
    stance = getattr(torch.compiler, "set_stance", None) if imported else None  # torch 2.6 and later
    with (stance("force_eager") if stance is not None else contextlib.nullcontext()):
        try:
            yield
        finally:
            if "torch._dynamo" in sys.modules and (not imported or stance is None):
                torch.compiler.reset()


def traced_call(thunk: Callable[[], Any], *, forbidden: Iterable[str], baseline_code: Any = None
                ) -> tuple[Any, list[str], list[str]]:
    """(output, problems, ops seen) of one call under the dispatch trace and a profile hook."""
    forbidden = list(forbidden)
    bad_ops = forbidden_ops(forbidden)
    bad_objs = {id(o): n for n in forbidden if (o := resolve(n)) is not None}
    hits: list[str] = []

    def hook(frame, event, arg):
        if event == "call" and baseline_code is not None and frame.f_code is baseline_code:
            hits.append(f"called the baseline's own function `{baseline_code.co_name}` at run time")
        elif event == "c_call" and id(arg) in bad_objs:
            hits.append(f"called forbidden `{bad_objs[id(arg)]}` at run time")

    before = set(threading.enumerate())
    rec = _recorder()
    old = sys.getprofile()
    with rec, _dynamo_left_as_found():
        sys.setprofile(hook)
        try:
            out = thunk()
        finally:
            sys.setprofile(old)
    problems = sorted(set(hits))
    seen = sorted(rec.ops)
    problems += [f"ran forbidden op aten::{op} (dispatch trace)" for op in seen if op in bad_ops]
    problems += new_threads(before)
    return out, problems, seen


def new_threads(before: set, grace_s: float = 0.05) -> list[str]:
    """Threads started since ``before`` still running after a short grace: claim code must not leave any."""
    deadline = time.monotonic() + grace_s
    while True:
        extra = [t for t in threading.enumerate() if t not in before and t.is_alive()]
        if not extra or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    return [f"left thread {t.name!r} running after returning" for t in extra]


def prime() -> None:
    """Enter the dispatch machinery once, so its lazy set-up does not happen during the kernel."""
    with _recorder():
        torch.ones(2).add(1)
