"""A side's message loop: load the claim's modules for this role, then answer requests.

It runs in a process forked from the fork server (side/server.py). Claim code raising, or an
output the harness refuses, is answered as `Failed` and the side goes on; the orchestrator ends
the claim. Nothing here is trusted by the orchestrator.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any, Optional

from claimbench.orchestrator import messages as m
from claimbench.orchestrator.channel import Channel, ChannelClosed
from claimbench.side.calls import ClaimCodeError


def serve(sock: socket.socket, role: str, *, confined: int = 0) -> None:
    """The side's loop on ``sock``: Ready (saying whether it confined itself, before claim code can
    say anything), then one reply per request until Bye or a closed channel, when the process exits.
    A failure is replied as Failed, never raised."""
    ch = Channel(sock, "orchestrator")
    ch.send(m.Ready(pid=os.getpid(), versions=_versions(), confined=confined))
    handler: Any = None
    while True:
        try:
            msg, fds = ch.recv()
        except ChannelClosed:
            os._exit(0)
        if isinstance(msg, m.Bye):
            os._exit(0)
        out_fds: list[int] = []
        try:
            if isinstance(msg, m.Load):
                handler, reply = _load(msg, role)
            elif isinstance(msg, m.Ping):
                reply = m.Pong()
            elif handler is None:
                raise TypeError(f"{msg.kind!r} before load")
            else:
                reply, out_fds = handler.handle(msg, fds)
        except ClaimCodeError as e:
            reply = m.Failed(key=e.key, message=e.message[:20_000], traceback=e.tb[-6000:], verdict=e.verdict)
            print(f"{role} side: {e.message}\n{e.tb}", file=sys.stderr, flush=True)  # the claim's log
        except Exception as e:  # the harness's own side failed: an error, with its traceback
            import traceback

            reply = m.Failed(message=f"{type(e).__name__}: {e}"[:2000], traceback=traceback.format_exc()[-6000:])
        try:
            ch.send(reply, tuple(out_fds))
        except ChannelClosed:
            os._exit(0)
        finally:
            for fd in out_fds:
                os.close(fd)


def _load(msg: m.Load, role: str) -> tuple[Any, m.Message]:
    import torch

    from claimbench.side.loader import LoadError, load, project_modules

    root = Path(msg.root)
    if msg.role != role:
        raise TypeError(f"this process serves {role}, not {msg.role}")

    def resolve(key: str, ref: str):
        try:
            return load(root, ref)
        except LoadError as e:
            raise ClaimCodeError(key, f"{key}: {e}") from None
        except BaseException as e:  # the module's own code failed at import
            import traceback

            first = (str(e).strip().splitlines() or [""])[0][:400]
            raise ClaimCodeError(key, f"{key}: importing {ref} raised {type(e).__name__}: {first}",
                                 tb=traceback.format_exc()[-6000:]) from None

    threads = os.environ.get("CLAIMBENCH_THREADS", "")
    if threads.isdigit() and int(threads) > 0:
        torch.set_num_threads(int(threads))
    from claimbench.side.warmup import warm_math_libraries
    warm_math_libraries()  # before any claim module: its first threaded math op must not set the library up
    if msg.dist is not None:
        _join_group(msg.dist, msg.device)
    if role == "task":
        from claimbench.side.task import TaskSide
        handler: Any = TaskSide(resolve, msg)
    else:
        from claimbench.side.caller import CallerSide
        if role == "kernel":  # before the kernel's modules load: every call of theirs meets it
            from claimbench.side.tripwire import install
            install(list(msg.forbidden))
        handler = CallerSide(resolve, msg)
    from claimbench.side.trace import prime
    prime()
    timer = getattr(handler, "timer", None)
    return handler, m.Loaded(sources=project_modules(root), flush_bytes=getattr(timer, "flush_bytes", None),
                             l2_reset=getattr(timer, "l2_reset", None))


def _join_group(spec: m.DistSpec, device: str) -> None:
    """This side's own process group: the kernel's ranks talk to each other, never to the baseline's."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    kw: dict[str, Any] = {}
    if device == "cuda":
        torch.cuda.set_device(spec.local_rank)
        kw["device_id"] = torch.device("cuda", spec.local_rank)
    store = dist.PrefixStore(spec.prefix, dist.TCPStore(spec.master_addr, spec.master_port, is_master=False,
                                                        timeout=timedelta(seconds=spec.timeout_s)))
    dist.init_process_group(spec.backend, store=store, rank=spec.rank, world_size=spec.world,
                            timeout=timedelta(seconds=spec.timeout_s), **kw)


def _versions() -> dict:
    out: dict[str, Optional[str]] = {"python": sys.version.split()[0]}
    for name in ("torch", "triton", "numpy"):
        mod = sys.modules.get(name)
        out[name] = getattr(mod, "__version__", None) if mod else None
    return out
