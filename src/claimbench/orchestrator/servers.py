"""The fork servers of one `run`: started early, shared by its claims, replaced when killed.

One server per kind of sandbox a claim needs (a CUDA claim inside bwrap needs the device nodes),
and per import-time environment (backends.IMPORT_TIME_ENV): a Triton claim checked on CPU needs
`TRITON_INTERPRET=1` before the server imports Triton, since Triton fixes at import whether its
standard library is interpreted. Setting the variable in the forked side is too late, and setting
it for every server would interpret a GPU claim's kernel on a machine that can compile it. Every
side of a claim run on the CPU has it (backends.child_env), so a CPU run needs one server; on a GPU
machine, claims checked on its CPU get a server of their own (one more torch import). The server
refuses a side whose import-time environment differs from its own (side/server.py), so a mismatch
is an error, never a kernel that silently runs another way.
The first starts before hardware detection, so its second of imports overlaps the parent's work.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from claimbench.machine.backends import import_env
from claimbench.orchestrator.filecensus import Backup
from claimbench.orchestrator.processes import ForkServer
from claimbench.orchestrator.sandbox import Sandbox, choose

# glibc adapts its mmap and trim thresholds to what a process allocated so far, so the same eager
# kernel paid page faults, or did not, depending on the harness's history (measured: a CPU
# baseline's median moved 3.2 -> 4.6 ms between harness versions). Fixed thresholds in the fork
# server hold for every side forked from it; a user's own MALLOC_* settings win.
HOST_ALLOCATOR_ENV = {"MALLOC_MMAP_THRESHOLD_": str(32 << 20), "MALLOC_TRIM_THRESHOLD_": str(1 << 30)}


# Settings that make an OpenMP runtime bind its threads to CPUs. A side may not change its threads'
# CPUs (machine/pinning.py: its seccomp filter answers sched_setaffinity with EPERM), and libgomp,
# asked to bind, fails its first parallel region ("libgomp: Thread creation failed: Operation not
# permitted"), so with OMP_PROC_BIND=true in the shell every claim run on two threads or more ended in
# error. The orchestrator pins each side to its cores itself; these are left out of the fork server's
# environment (libgomp reads them when torch loads it there) and `run` says so at its start.
THREAD_BINDING_ENV = ("OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")


def dropped_binding(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The thread-binding settings of ``environ`` (ours by default) a fork server leaves out, as NAME=VALUE."""
    return [f"{key}={environ[key]}" for key in THREAD_BINDING_ENV if key in environ]


def server_env(threads: int | None, side_env: dict | None = None) -> dict:
    """The fork server's environment: ours less the thread-binding settings, the host allocator's
    settings, and the import-time part of the sides' environment (``side_env``), set or unset exactly
    as the sides will have it."""
    env = {key: value for key, value in os.environ.items() if key not in THREAD_BINDING_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in import_env(side_env or {}).items():
        if value:
            env[key] = value
        else:
            env.pop(key, None)
    for key, value in HOST_ALLOCATOR_ENV.items():
        env.setdefault(key, value)
    env.setdefault("OMP_NUM_THREADS", str(threads or os.cpu_count() or 1))
    env.pop("CLAIMBENCH_RESULT_FD", None)
    return env


# The fork servers every pooled `Servers` of this process shares (the API's `run_one` without a run,
# called for claims of several projects): a server runs no claim code and is tied to no project
# outside bwrap (each side is told its project, its working folder and its Landlock rules), so one
# torch import serves them all. Its own log stays in the results folder of the run that started it.
# Closed when the process exits.
_POOL: dict[tuple, ForkServer] = {}


def close_pool() -> None:
    """Close every pooled server."""
    for server in _POOL.values():
        server.close()
    _POOL.clear()


class Servers:
    """One `run`'s fork servers, keyed by sandbox and import-time environment, and its backups; as a
    context manager it closes all of them at the end. ``pooled``: outside bwrap, take the servers from
    this process's pool and leave them running at the end."""

    def __init__(self, root: Path, opts, *, pooled: bool = False) -> None:
        self.root, self.opts, self.pooled = root, opts, pooled
        self.running: dict[tuple, ForkServer] = {}
        self.backups: dict[str, Backup] = {}
        self.log_dir = Path(opts.results) / ".cache" / "logs"

    def __enter__(self) -> "Servers":
        return self

    def __exit__(self, *exc) -> None:
        for server in self.running.values():
            server.close()
        self.running.clear()
        for backup in self.backups.values():
            backup.close()
        self.backups.clear()

    def backup(self, folder: Path) -> Backup:
        """Copies of the untracked files under ``folder``, kept for the whole run."""
        key = str(Path(folder).resolve())
        if key not in self.backups:
            self.backups[key] = Backup(Path(key))
        return self.backups[key]

    def sandbox(self, cuda: bool, network: bool = False) -> Sandbox:
        """The sandbox the run's --sandbox gives a claim; raises SandboxUnavailable when bwrap is required
        and cannot run."""
        return choose(self.opts.sandbox, cuda=cuda, network=network)

    def start_early(self, side_env: dict | None = None) -> None:
        """Starts the non-CUDA server before hardware detection, so its torch import overlaps that work."""
        self.get(self.sandbox(cuda=False), side_env)

    def get(self, sandbox: Sandbox, side_env: dict | None = None) -> ForkServer:
        """The server for this sandbox and the sides' import-time environment, started if needed."""
        wanted = import_env(side_env or {})
        pooled = self.pooled and sandbox.kind != "bwrap"  # bwrap binds its project when the server starts
        running = _POOL if pooled else self.running
        key: tuple = (sandbox.kind, sandbox.cuda, sandbox.network, tuple(sorted(wanted.items())),
                      self.opts.threads if pooled else None)
        server = running.get(key)
        if server is not None and not server.alive():
            server.close()
            server = None
        if server is None:
            server = ForkServer(self.root, server_env(self.opts.threads, side_env), sandbox=sandbox, log_path=self.log_dir / "fork-server.log")
            if pooled and not _POOL:
                import atexit
                atexit.register(close_pool)
            running[key] = server
        return server

    def wait_ready(self) -> None:
        """Waits for every started server's imports, so they do not share the cores with a measurement."""
        for server in [*self.running.values(), *(_POOL.values() if self.pooled else ())]:
            server.wait_ready()
