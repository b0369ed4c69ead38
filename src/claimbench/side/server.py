"""The fork server: imports torch (and Triton) once, then forks each side of each claim.

Starting three processes per claim, each importing torch, would cost seconds; forking them from
a process that has already imported torch costs milliseconds. No claim code ever runs here: the
server imports only torch, Triton and claimbench's side modules, and each fork loads its claim's
modules itself. The server is a child subreaper, so a side's descendants that detach (`setsid`,
double fork) are reparented to it, and `kill_all` ends every one of them.

The environment a package reads at import (backends.IMPORT_TIME_ENV: Triton's interpreter switch)
is the server's own, fixed before it imports Triton; a Spawn asking for other values is refused,
since the forked side would inherit modules imported the other way.

Run as `python -m claimbench.side.server FD`, FD being its end of the orchestrator's socketpair.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import socket
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def main(argv: list[str]) -> int:
    """The fork server's loop on fd ``argv[1]``: one side forked per Spawn whose import-time environment is
    its own, and every child killed on KillAll, Bye or a lost orchestrator."""
    ctl_fd = int(argv[1])
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # the orchestrator gone: so are we
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    import importlib.util

    from claimbench.machine.backends import import_env
    imported_with = import_env(dict(os.environ))  # before torch and Triton read it
    import torch  # noqa: F401  (the point of this process: imported once, before any fork)
    if importlib.util.find_spec("triton") is not None:
        import triton  # noqa: F401

        from claimbench.side import interpret
        interpret.install()  # interpreted only: tl.dot's rows must not depend on the CPU's BLAS
    from claimbench.orchestrator import messages as m
    from claimbench.orchestrator.channel import Channel, ChannelClosed
    from claimbench.side import caller, task, trace, tripwire, warmup  # noqa: F401  (preloaded for the forks)
    from claimbench.side.loader import remember_preloaded
    remember_preloaded()  # last: every module imported so far is the server's, none a kernel's

    ctl = Channel(socket.socket(fileno=ctl_fd), "orchestrator")
    ctl.send(m.Ready(pid=os.getpid(), versions={"torch": torch.__version__}))
    children: set[int] = set()
    while True:
        try:
            msg, fds = ctl.recv()
        except ChannelClosed:
            _kill_all()
            os._exit(0)
        if isinstance(msg, m.Spawn) and import_env(msg.env) != imported_with:
            for fd in fds:
                os.close(fd)
            ctl.send(m.Failed(message=f"this fork server imported torch and Triton with {imported_with}, "
                                      f"the {msg.role} side needs {import_env(msg.env)}: a side must come from a "
                                      "server started with its import-time environment"))
        elif isinstance(msg, m.Spawn):
            pid = _fork_side(msg, fds, ctl_fd)
            children.add(pid)
            for fd in fds:
                os.close(fd)
            ctl.send(m.Spawned(pid=pid))
        elif isinstance(msg, m.KillAll):
            _kill_all()
            ctl.send(m.Done())
        elif isinstance(msg, m.Bye):
            _kill_all()
            os._exit(0)
        else:
            ctl.send(m.Failed(message=f"the fork server does not take {msg.kind!r}"))
        _reap()


def _fork_side(msg, fds: list[int], ctl_fd: int) -> int:
    chan_fd, log_fd = fds[0], fds[1]
    pid = os.fork()
    if pid:
        return pid
    try:  # the child: nothing of the server's may reach claim code
        os.setsid()
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if msg.cwd:
            os.chdir(msg.cwd)  # the claim's project, which need not be the one the server started in
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        keep = {0, 1, 2, chan_fd}
        for fd in _open_fds():
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.environ.update(msg.env)  # its import-time keys match the server's (checked before the fork)
        _default_handlers()
        _one_compile_thread()
        if msg.max_memory_bytes:
            resource.setrlimit(resource.RLIMIT_AS, (msg.max_memory_bytes, msg.max_memory_bytes))
        if msg.no_event_sources:
            _few_files()
        sys.stdout = os.fdopen(1, "w", buffering=1)
        sys.stderr = os.fdopen(2, "w", buffering=1)
        confined = _confine(msg.confine, msg.role) if msg.confine is not None else 0
        _pinned(msg.no_event_sources)
        _unprivileged()
        from claimbench.side.main import serve
        serve(socket.socket(fileno=chan_fd), msg.role, confined=confined)
    except BaseException:
        import traceback
        traceback.print_exc()
    os._exit(70)


def _default_handlers() -> None:
    """No Python signal handler of the server's (SIGINT's, Python's own) survives into a side: a side
    is stopped and thawed between exchanges, and a handler runs at the thaw, untimed, so the census
    refuses any handler in a side (`census.unlike`); a kernel re-pointing a handler the side already
    had (SIGINT, delivered by a timer while the side was stopped) would not change the mask it reads."""
    for sig in signal.valid_signals():
        try:
            if callable(signal.getsignal(sig)):
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError, TypeError):  # a signal the C library keeps for itself
            pass


def _one_compile_thread() -> None:
    """`torch.compile` compiles in the calling thread: Inductor's pool of compile workers would stay
    as threads running after the call returned, which the census refuses in any side, so a baseline
    that a practitioner compiles (block-sparse attention's flex_attention) ended `rejected`. Set
    before any claim code loads; the config is read when Inductor is first imported, and set
    directly where the fork server had imported it already."""
    os.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"
    config = sys.modules.get("torch._inductor.config")
    if config is not None:
        config.compile_threads = 1  # type: ignore[attr-defined]


def _confine(spec, role: str) -> int:
    """The landlock sandbox, before anything of the claim's loads: caches and temporary files go to
    the run's scratch folder, then the kernel refuses every write elsewhere (machine/landlock.py).
    Inside bwrap (no scratch given) the side makes its own folder in the sandbox's /tmp first, which
    the other sides cannot write. A side that cannot confine itself exits here: the record would
    say it was confined."""
    import tempfile

    from claimbench.machine import landlock

    scratch = spec.scratch
    try:
        scratch = scratch or tempfile.mkdtemp(prefix=f"claimbench-{role}-", dir="/tmp")
    except OSError as e:
        print(f"the side could not make its scratch folder in /tmp: {e}", file=sys.stderr, flush=True)
        os._exit(71)
    for key in ("HOME", "TMPDIR", "XDG_CACHE_HOME"):
        os.environ[key] = scratch
    for key, sub in (("TRITON_CACHE_DIR", "triton"), ("TORCHINDUCTOR_CACHE_DIR", "inductor"),
                     ("CUPY_CACHE_DIR", "cupy"), ("CUDA_CACHE_PATH", "nv")):
        os.environ[key] = os.path.join(scratch, sub)
    tempfile.tempdir = None  # read TMPDIR again
    try:
        return landlock.confine([*spec.writable, scratch, f"/proc/{os.getpid()}"], protected=spec.protected)
    except landlock.ConfineError as e:
        print(f"the side could not confine itself with Landlock: {e}", file=sys.stderr, flush=True)
        os._exit(71)


MAX_FILES = 1024  # a CPU side's open files, soft and hard


def _few_files() -> None:
    """A CPU side may hold at most MAX_FILES open files. Why: what a stopped side's sources cost the side
    being timed grows with how many epoll instances watch each one: 19,000 epolls on one loopback TCP
    socket paced by the kernel's own TCP timer made each paced segment 1.3 ms of callbacks in the
    baseline's time (an adversarial review: `pace_storm`, 1.558x verified once in about 20 runs). With
    1,024 descriptors (the kernel caps nested epoll wake-up paths at 500, 100, 50, 10 by depth) a wake-up
    costs about a tenth of a millisecond, and enough of them to matter are counted as interrupts
    (`orchestrator/interrupts.py`). An honest CPU kernel holds a few dozen."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = MAX_FILES if hard == resource.RLIM_INFINITY else min(hard, MAX_FILES)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, cap) if soft != resource.RLIM_INFINITY else cap, cap))


def _pinned(no_event_sources: bool) -> None:
    """No thread of this side may change its CPUs or leave its process group, and a CPU side may not make
    what fires while it is stopped (machine/pinning.py): set before any claim code loads. A side that
    cannot say so exits here, as one that cannot confine itself does."""
    from claimbench.machine import pinning

    why = pinning.install(event_sources=no_event_sources)
    if why:
        print(f"the side could not lock its CPU affinity: {why}", file=sys.stderr, flush=True)
        os._exit(71)


def _unprivileged() -> None:
    """No capability survives into claim code (machine/privileges.py): after the filter, which sets
    no_new_privs. A side that cannot drop them exits here, as one that cannot confine itself does."""
    from claimbench.machine import privileges

    why = privileges.drop()
    if why:
        print(f"the side could not drop its capabilities: {why}", file=sys.stderr, flush=True)
        os._exit(71)


def _open_fds() -> list[int]:
    try:
        return [int(x) for x in os.listdir("/proc/self/fd")]
    except OSError:
        return list(range(3, 1024))


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _children() -> list[int]:
    from claimbench.orchestrator.census import children
    return children(os.getpid())


def _kill_all() -> None:
    """SIGKILL every child, again and again: orphans of those just killed are reparented to us."""
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        kids = _children()
        if not kids:
            _reap()
            return
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.01)
        _reap()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
