"""The claim's processes from the orchestrator's side: the fork server, the sides, freezing, reaping.

Each side leads its own session (it calls setsid), so its process group is everything it forked
that did not detach; what detached is found by parent links in /proc, and anything orphaned is
reparented to the fork server (a child subreaper), which kills all of it at the end of the claim.
A side that is not the one being timed is stopped with SIGSTOP, its whole group and every
descendant, so nothing it started can compete with the other side or do work unobserved.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

from claimbench.orchestrator import census
from claimbench.orchestrator import messages as m
from claimbench.orchestrator.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolError, SideFailed
from claimbench.orchestrator.sandbox import Sandbox


class ForkServer:
    """The sandboxed process that imports torch once and forks every side from it, spoken to over
    ``ctl``; a run keeps it for the claims that share its sandbox and import-time environment."""

    def __init__(self, root: Path, env: dict, *, sandbox: Sandbox, log_path: Path) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(log_path, "ab")
        argv = sandbox.wrap([sys.executable, "-m", "claimbench.side.server", str(theirs.fileno())], root)
        self.sandbox, self.root = sandbox, root
        # per project served and per role, made at its first side: a landlock side may write only its own
        self.scratches: dict[tuple[str, str], str] = {}
        # inside bwrap the sides share one private /tmp, so each also confines itself with Landlock (where
        # the kernel has it) to a folder of its own there: the kernel's side compiling into the baseline's
        # compiler cache and editing its generated code ran the baseline's work four times (1.76x for a
        # kernel at 0.55x, an adversarial review; closed under Landlock alone before, open under bwrap)
        self.landlock_inside = sandbox.kind == "bwrap" and _landlock_abi() >= 1
        self.proc = subprocess.Popen(argv, pass_fds=(theirs.fileno(),), env=env, cwd=str(root),
                                     stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        theirs.close()
        self.ctl = Channel(ours, "the fork server")
        self.ready: Optional[m.Ready] = None
        self.pid_inside: Optional[int] = None

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """Block until the server says `Ready` (its imports are done), once; a server that died says
        why from the last line of its log."""
        if self.ready is None:
            try:
                reply, fds = self.ctl.recv(timeout_s)
            except ChannelClosed:
                self.log.flush()
                last = (Path(self.log.name).read_text(errors="replace").strip().splitlines() or ["no output"])[-1]
                raise ChannelClosed(f"the fork server failed to start: {last[:300]}") from None
            for fd in fds:
                os.close(fd)
            if not isinstance(reply, m.Ready):
                raise ChannelClosed(f"the fork server answered {reply.kind!r} instead of ready")
            self.ready = reply
            self.pid_inside = reply.pid

    @property
    def host_pid(self) -> int:
        """The server's pid as the orchestrator sees it (inside bwrap it is a grandchild)."""
        if self.sandbox.kind != "bwrap":  # no PID namespace of its own
            return self.proc.pid
        return host_pid(self.pid_inside or 0, census.tree([self.proc.pid]))

    def alive(self) -> bool:
        """Whether the process we started for the server is still running."""
        return self.proc.poll() is None

    def scratch_for(self, root: Path, role: m.Role) -> Optional[str]:
        """The scratch folder of ``root``'s ``role`` sides under Landlock (made on first use), else None.

        One per role, never shared: a scratch folder holds its side's compiler caches (Triton, Inductor),
        and with one folder for all three roles the kernel's side compiled the baseline at the claim's
        shapes and edited the generated code the baseline's side then loaded, running its work four
        times: 1.76x for a kernel at 0.55x (an adversarial review, 2026-12-06)."""
        if self.sandbox.kind != "landlock":
            return None
        key = (str(Path(root).resolve()), role)
        if key not in self.scratches:
            self.scratches[key] = _scratch(Path(key[0]))
        return self.scratches[key]

    def spawn(self, role: m.Role, env: dict, *, log_fd: int, max_memory_bytes: Optional[int],
              timeout_s: float = 60.0, root: Optional[Path] = None, no_event_sources: bool = False) -> "SideProcess":
        """Fork a ``role`` side of a claim of ``root`` (default: the server's own) with its own channel and
        ``log_fd``, and wait for its `Ready`; a refusal by the server is a ProtocolError. Under bwrap the
        server sees only the project it started in, so it serves no other."""
        root = Path(root if root is not None else self.root)
        if self.sandbox.kind == "bwrap" and root.resolve() != Path(self.root).resolve():
            raise ProtocolError(f"a bwrap fork server of {self.root} cannot serve {root}")
        self.wait_ready()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        scratch = self.scratch_for(root, role)
        if scratch:
            confine: Optional[m.Confine] = m.Confine(writable=["/dev"], protected=str(root), scratch=scratch)
        elif self.landlock_inside:  # a folder of its own in bwrap's shared /tmp
            confine = m.Confine(writable=["/dev"], protected=str(root), scratch="")
        else:
            confine = None
        try:
            reply, fds = self.ctl.request(m.Spawn(role=role, env=env, max_memory_bytes=max_memory_bytes,
                                                  confine=confine, cwd=str(root), no_event_sources=no_event_sources),
                                          m.Spawned, fds=(theirs.fileno(), log_fd), timeout_s=timeout_s)
        except SideFailed as e:  # the server refused: the claim ends in error, with its words
            ours.close()
            raise ProtocolError(f"the fork server refused the {role} side: {e}") from None
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        for fd in fds:
            os.close(fd)
        pid = reply.pid if self.sandbox.kind != "bwrap" else host_pid(reply.pid, census.tree([self.proc.pid]))
        side = SideProcess(role, pid, Channel(ours, f"the {role} side"))
        side.allowed_handlers = census.allowed_handlers(census.caught_signals(self.host_pid))
        try:
            hello, fds = side.channel.recv(timeout_s)
            for fd in fds:
                os.close(fd)
            if not isinstance(hello, m.Ready):
                raise ChannelClosed(f"the {role} side answered {hello.kind!r} instead of ready")
            if confine is not None and hello.confined < 1:  # fail closed: the record would say landlock
                raise ProtocolError(f"the {role} side did not confine itself with Landlock")
        except BaseException:
            side.channel.close()
            raise
        side.versions = dict(hello.versions)
        return side

    def kill_all(self, timeout_s: float = 20.0) -> None:
        """Every process of the claim, detached ones included, killed and reaped by the server."""
        if not self.alive():
            return
        try:
            self.ctl.request(m.KillAll(), m.Done, timeout_s=timeout_s)
        except (ChannelClosed, ChannelTimeout):
            self.close()

    def close(self) -> None:
        """Say `Bye`, then SIGKILL the server's whole tree and group and reap it; safe on a server
        already gone."""
        try:
            self.ctl.send(m.Bye())
        except (ChannelClosed, OSError):
            pass
        self.ctl.close()
        for pid in census.tree([self.proc.pid]):
            _signal(pid, signal.SIGKILL)
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.log.close()
        import shutil
        for scratch in self.scratches.values():  # every side is gone: its caches and temporary files go with them
            shutil.rmtree(scratch, ignore_errors=True)


def host_pid(inner: int, candidates: list[int]) -> int:
    """Map a pid inside bwrap's PID namespace to ours, through /proc/<pid>/status's NSpid line."""
    for pid in candidates:
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("NSpid:"):
                        if int(line.split()[-1]) == inner:
                            return pid
                        break
        except OSError:
            continue
    raise ChannelClosed(f"process {inner} of the sandbox was not found")


class SideProcess:
    """One side (task, kernel or baseline): its pid, its channel, and what it looked like."""

    def __init__(self, role: str, pid: int, channel: Channel) -> None:
        self.role, self.pid, self.channel = role, pid, channel
        self.versions: dict = {}
        self.frozen = False
        self.extra: list[int] = []  # descendants that left the group; frozen by pid
        self.cpu_at_freeze: Optional[float] = None
        self.idle_cpu_s = 0.0       # CPU its processes used while stopped: none, unless freezing failed
        # the signal handlers a side may have (census.allowed_handlers), and those seen beyond them at any
        # freeze: a handler in place while the side is stopped runs at the thaw, outside the timed call
        self.allowed_handlers: Optional[int] = None
        self.handled_extra = 0

    def members(self, table: Optional[dict[int, census.Stat]] = None) -> list[int]:
        """Every process of this side now: its session (a side starts one, and may not leave it:
        machine/pinning.py) and, by parent links, descendants. A process that left the side's tree
        (cloned with CLONE_PARENT) and its group (setpgid) is still of its session. ``table`` is one
        `census.all_stats()` shared by the sides of one look (reading /proc once per side made the
        census a fifth of the orchestrator's CPU time)."""
        table = table if table is not None else census.all_stats()
        group = [p for p, s in table.items() if s.sid == self.pid or s.pgid == self.pid]
        return sorted(set(census.tree([self.pid], table)) | set(group))

    def refresh(self, table: Optional[dict[int, census.Stat]] = None) -> list[int]:
        """Who belongs to this side now; descendants outside the group are frozen by pid."""
        table = table if table is not None else census.all_stats()
        mem = self.members(table)
        self.extra = [p for p in mem if p in table and table[p].pgid != self.pid]
        return mem

    def freeze(self) -> None:
        """SIGSTOP the side's group and its detached descendants and note their CPU time, so work done
        while stopped shows at `thaw`."""
        try:
            os.killpg(self.pid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in self.extra:
            _signal(pid, signal.SIGSTOP)
        self.frozen = True
        self.wait_stopped()
        self.cpu_at_freeze = census.cpu_seconds([self.pid, *self.extra])
        if self.allowed_handlers is not None:  # stopped: its handlers cannot change until the next thaw
            for pid in (self.pid, *self.extra):
                self.handled_extra |= census.caught_signals(pid) & ~self.allowed_handlers

    def thaw(self) -> None:
        """SIGCONT the side, first adding the CPU its processes used while stopped to ``idle_cpu_s``."""
        if self.cpu_at_freeze is not None:
            self.idle_cpu_s += max(0.0, census.cpu_seconds([self.pid, *self.extra]) - self.cpu_at_freeze)
            self.cpu_at_freeze = None
        for pid in self.extra:
            _signal(pid, signal.SIGCONT)
        try:
            os.killpg(self.pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass
        self.frozen = False

    def wait_stopped(self, timeout_s: float = 2.0) -> bool:
        """True once the side's main process is stopped (its memory can be read as it is). The poll
        starts at 50 us and backs off to 1 ms: a side that stops at once is seen at once, and one the
        scheduler has not run yet (a busy machine) is not read a thousand times a second."""
        deadline = time.monotonic() + timeout_s
        pause = 0.00005
        while time.monotonic() < deadline:
            st = census.state(self.pid)
            if st is None or st in ("T", "t", "Z", "X"):
                return True
            time.sleep(pause)
            pause = min(pause * 2, 0.001)
        return False

    def alive(self) -> bool:
        """Whether the side's main process still exists and is not a zombie."""
        st = census.state(self.pid)
        return st is not None and st not in ("Z", "X")


def _landlock_abi() -> int:
    from claimbench.machine.landlock import abi

    return abi()


def _scratch(root: Path) -> str:
    """A landlock run's scratch folder (the sides' HOME, TMPDIR and caches), the only place its sides
    may write; never inside the project, which they must not change. Named after this process, so a
    run killed with `kill -9` leaves one the next run removes (filecensus.sweep_backups)."""
    import tempfile

    from claimbench.orchestrator.filecensus import SCRATCH_PREFIX

    base = tempfile.gettempdir()
    if Path(base).resolve().is_relative_to(root.resolve()):
        base = "/tmp"
    return tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{os.getpid()}-", dir=base)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
