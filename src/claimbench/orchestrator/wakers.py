"""What a stopped side holds that fires without it: timer, signal, io_uring and file-watch descriptors,
and POSIX timers.

Why: a side is stopped (SIGSTOP) while the other is timed, and a stopped process runs no code, but the
kernel still expires its timers and wakes whatever waits on them, on the core both sides share, and on
a kernel without IRQ time accounting that work is charged to the task it interrupts. In an adversarial
review (2026-12-06, static rules on) a kernel built a small C module at import that opened 120
timerfds and 4,500 epoll instances, each watching every timerfd, so that one expiry ran 4,500 epoll
callbacks inside one timer interrupt (about 1 ms); armed in its last untimed exchange, the expiries
landed in the baseline's timed calls: 1.67x and 2.05x verified for an honest 1.0x (`epoll_storm`). The
interrupt blocker (`interrupts.py`) counts interrupts, not what each costs, and saw 580/s against 268/s.
A second fixture used the same storm to widen the baseline's refresh null spread, and with it the
allowance for work hidden in the kernel's refresh null (`hook_null_mm`, 2.2-2.5x).

Counting the cost of an interrupt needs IRQ time accounting, which many kernels lack. What the storm
needs is a source that fires on its own (a timer, a signal a timer raises, an io_uring timeout, a file
event) and no honest kernel holds one: torch, Triton and claimbench's side code open none (checked on
a CPU). So a CPU run rejects a kernel or task side that holds any, read from /proc at every round's
check, while the side is stopped: the sources cannot close without the side running, and a side runs
only in its own calls, so a source open during a baseline's run is still open at the round boundary
next to that run (rounds go K B | B K).
"""

from __future__ import annotations

import os
from typing import Iterable

# readlink of /proc/PID/fd/N for the descriptors that fire while their process is stopped
_KINDS = {"anon_inode:[timerfd]": "timer", "anon_inode:[signalfd]": "signal", "anon_inode:[io_uring]": "io_uring",
          "anon_inode:inotify": "inotify", "anon_inode:[fanotify]": "fanotify"}


def sources(pid: int) -> dict[str, int]:
    """How many of each kind of self-firing source process ``pid`` holds ("posix timer" from
    /proc/PID/timers); an unreadable process holds none that can be named (the census reads it otherwise)."""
    out: dict[str, int] = {}
    try:  # every task's table: a thread cloned without CLONE_FILES has one of its own
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        tasks = []
    tables: set[frozenset] = set()  # threads sharing one table list the same descriptors: counted once
    for tid in tasks:
        base = f"/proc/{pid}/task/{tid}/fd"
        try:
            fds = os.listdir(base)
        except OSError:
            continue
        held = []
        for fd in fds:
            try:
                kind = _KINDS.get(os.readlink(f"{base}/{fd}"))
            except OSError:
                continue
            if kind is not None:
                held.append((fd, kind))
        table = frozenset(held)
        if held and table not in tables:
            tables.add(table)
            for _, kind in held:
                out[kind] = out.get(kind, 0) + 1
    try:
        with open(f"/proc/{pid}/timers", encoding="ascii", errors="replace") as f:
            timers = sum(1 for line in f if line.startswith("ID:"))
    except OSError:
        timers = 0
    if timers:
        out["posix timer"] = timers
    return out


def problems(members: dict[str, list[int]], roles: Iterable[str] = ("task", "kernel")) -> list[str]:
    """One line per process of ``roles`` that holds a self-firing source."""
    out = []
    for role in roles:
        for pid in members.get(role, ()):
            found = sources(pid)
            if found:
                held = ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in sorted(found.items()))
                out.append(f"the {role} side (pid {pid}) holds {held}: a side stopped while the other is timed must "
                           "hold nothing that fires on its own (its expiries run on the timed core, charged to the "
                           "side being timed)")
    return out
