"""A tripwire on the forbidden ops themselves, in the kernel's process, on every call alike.

The dispatch trace watches one call, and a kernel can see when it is watched (a profile hook, a
dispatch mode on the stack) and behave only then: the strict xfail `watch_trace_hidden` was such a
kernel. So before the kernel's modules load, each forbidden aten op (spec/ops.py: the op's group,
whatever spelling reaches it) gets a kernel of ours at the AutogradCPU and AutogradCUDA dispatch
keys, which every call from Python code reaches first (a composite op decomposes there into ops
that have them), and which the ops' own implementations skip: `torch._scaled_mm` on a CPU calls
`aten::matmul` below autograd, and an honest kernel calling it must not trip (at the CPU key it
did). It ends the process at once with an exit status that names the op. A status is written by
the OS and read by the orchestrator from /proc, so a finding leaves by a channel the kernel cannot
rewrite; and nothing changes between watched and unwatched calls, so there is nothing to tell apart.
Ops the kernel does not use cost nothing: only the forbidden ones are rerouted.

What it cannot stop: code in this process that takes the registration down again (it is a Python
object, reachable through `gc` or the dispatcher's private API), or that calls below the autograd
keys (`torch.inference_mode`, the dispatch-key guards). The static rules refuse those ways in;
docs/threats.md says what stays open.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from claimbench.spec import ops

_LIBS: list[Any] = []  # kept alive for the process: a dropped Library takes its kernels with it


def install(forbidden: list[str]) -> list[str]:
    """Reroute every overload of each tripwire op to a fatal kernel; the ops it could reroute."""
    if not forbidden:
        return []
    import warnings

    import torch

    lib = torch.library.Library("aten", "IMPL")
    _LIBS.append(lib)
    done = []
    for i, name in enumerate(ops.tripwire_ops(forbidden)):
        packet = getattr(torch.ops.aten, name, None)
        if packet is None:
            continue
        fatal = _fatal(name, ops.TRIPWIRE_EXIT_BASE + i)
        for overload in packet.overloads():
            qual = name if overload == "default" else f"{name}.{overload}"
            for key in ("AutogradCPU", "AutogradCUDA"):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "overriding a previously registered kernel": the point
                    try:
                        lib.impl(qual, fatal, key)
                    except RuntimeError:  # no such overload at this key (a composite-only op)
                        pass
        done.append(name)
    return done


def _fatal(name: str, code: int) -> Callable[..., Any]:
    msg = f"tripwire: the kernel ran forbidden op aten::{name}; its process ends here\n".encode()

    def trip(*_args: Any, **_kwargs: Any) -> Any:
        try:
            os.write(2, msg)  # for the claim's log; the evidence is the exit status
        finally:
            os._exit(code)
    return trip
