"""What the kernel's and the baseline's processes look like, read from /proc by the orchestrator.

Before every timed round each side's processes, threads, CPU affinity, scheduling (policy,
priority and nice value of every thread), cgroup and that cgroup's CPU quota are compared with what
they were after warm-up: a side that forks a helper, starts a thread, pins itself or its rival to
other cores, renices the rival, gives it SCHED_IDLE or moves it into a throttled cgroup is caught
here, from outside, whatever it reports.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable, Optional

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Stat:
    """The fields of /proc/<pid>/stat the harness uses (CPU times in seconds)."""

    pid: int
    state: str
    ppid: int
    pgid: int
    sid: int
    utime_s: float
    stime_s: float
    nice: int
    threads: int
    starttime: int
    rss_pages: int
    exit_code: Optional[int] = None
    rt_priority: int = 0
    policy: int = 0                  # SCHED_OTHER 0, FIFO 1, RR 2, BATCH 3, IDLE 5, DEADLINE 6  # the wait status of a zombie (Linux 3.5+), before it is reaped


def _stat_line(path: str) -> Optional[str]:
    """A /proc stat file's one line, read with bare system calls: the orchestrator reads thousands a
    claim (every census, every stop of a side), and a Python file object cost a third of the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, 4096).decode("ascii", "replace")  # the line is a few hundred bytes
    except OSError:
        return None
    finally:
        os.close(fd)


def state(pid: int) -> Optional[str]:
    """One process's state letter (R, S, T, Z ...), or None once it is gone: the stop wait's poll."""
    raw = _stat_line(f"/proc/{pid}/stat")
    if not raw:
        return None
    at = raw.rfind(")") + 2
    return raw[at:at + 1] or None


def stat(pid: int, tid: Optional[int] = None) -> Optional[Stat]:
    """One process's (with ``tid``, one thread's) /proc stat line; None once it is gone or unreadable."""
    raw = _stat_line(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat")
    if not raw:
        return None
    rest = raw[raw.rfind(")") + 2:].split()  # the command name may hold spaces and parentheses
    return Stat(pid=pid, state=rest[0], ppid=int(rest[1]), pgid=int(rest[2]), sid=int(rest[3]),
                utime_s=int(rest[11]) / CLK_TCK, stime_s=int(rest[12]) / CLK_TCK, nice=int(rest[16]),
                threads=int(rest[17]), starttime=int(rest[19]), rss_pages=int(rest[21]),
                exit_code=int(rest[49]) if len(rest) > 49 else None,
                rt_priority=int(rest[37]) if len(rest) > 38 else 0, policy=int(rest[38]) if len(rest) > 38 else 0)


def alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one owned by another user counts): the owner of a temp
    file or backup folder named after it may still be using it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def exit_text(status: Optional[int]) -> str:
    """A wait status in words: "exited with status 3", "was killed by SIGKILL"."""
    import signal

    if status is None:
        return "ended"
    if os.WIFSIGNALED(status):
        try:
            return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
        except ValueError:
            return f"was killed by signal {os.WTERMSIG(status)}"
    return f"exited with status {os.WEXITSTATUS(status)}"


def all_stats() -> dict[int, Stat]:
    """Every process's `Stat` at one moment, by pid: one table to follow parent links and groups in."""
    out = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = stat(int(name))
            if s is not None:
                out[s.pid] = s
    return out


def children(pid: int, table: Optional[dict[int, Stat]] = None) -> list[int]:
    """The direct children of ``pid`` by parent link: what the fork server still has to kill and reap."""
    table = table if table is not None else all_stats()
    return sorted(p for p, s in table.items() if s.ppid == pid)


def tree(roots: Iterable[int], table: Optional[dict[int, Stat]] = None) -> list[int]:
    """The roots and every descendant (by parent links), in no particular order."""
    table = table if table is not None else all_stats()
    kids: dict[int, list[int]] = {}
    for p, s in table.items():
        kids.setdefault(s.ppid, []).append(p)
    out, todo = [], [r for r in roots if r in table]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def threads(pid: int) -> list[int]:
    """The thread ids of ``pid``, from /proc/<pid>/task; empty once it is gone."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def affinity(tid: int) -> Optional[tuple[int, ...]]:
    """The CPUs thread ``tid`` may run on; None when it is gone or cannot be asked."""
    try:
        return tuple(sorted(os.sched_getaffinity(tid)))
    except OSError:
        return None


def pin(pids: Iterable[int], cpus: frozenset[int]) -> None:
    """Every thread of ``pids`` onto ``cpus``; threads they start later inherit it. `outside` then
    checks that it held: a thread that could not be pinned, or a kernel that widened its own CPUs,
    is a rejection, never a pass."""
    for pid in pids:
        for tid in threads(pid):
            try:
                os.sched_setaffinity(tid, cpus)
            except OSError:  # gone, or not ours to pin: `outside` names what stayed wide
                pass


def outside(shapes: dict[int, "ProcessShape"], cpus: Optional[frozenset[int]]) -> list[str]:
    """Processes with a thread allowed on CPUs beyond ``cpus`` (the side's `--threads` CPUs);
    empty when ``cpus`` is None (no limit: every core)."""
    if cpus is None:
        return []
    return [f"process {pid} has threads allowed on CPUs {_cpus(sh.affinities)}, beyond the {len(cpus)} it was "
            f"given ({','.join(map(str, sorted(cpus)))}): with more cores than its rival its number would not compare"
            for pid, sh in sorted(shapes.items()) if any(not set(a) <= cpus for a in sh.affinities)]


@dataclass(frozen=True)
class ProcessShape:
    """One process of a side as the orchestrator sees it."""

    pid: int
    threads: int
    affinities: tuple[tuple[int, ...], ...]  # the distinct CPU sets of its threads
    nice: int
    sched: tuple[tuple[int, int, int], ...] = ()  # the distinct (policy, rt priority, nice) of its threads
    cgroup: str = ""
    cpu_quota: str = ""                           # the cgroup's cpu.max ("" where unreadable)
    caught: int = 0                               # the signals it has handlers for (SigCgt, bit n-1 for signal n)


def shape(pids: Iterable[int]) -> dict[int, ProcessShape]:
    """How each live process of ``pids`` looks now (zombies left out): what `differences` and `unlike` compare."""
    out = {}
    for pid in pids:
        s = stat(pid)
        if s is None or s.state in ("Z", "X"):
            continue
        tids = threads(pid)
        affs = tuple(sorted({a for a in (affinity(t) for t in tids) if a is not None}))
        sched = tuple(sorted({(t.policy, t.rt_priority, t.nice) for t in (stat(pid, tid) for tid in tids) if t}))
        group = cgroup(pid)
        out[pid] = ProcessShape(pid=pid, threads=len(tids), affinities=affs, nice=s.nice, sched=sched,
                                cgroup=group, cpu_quota=cpu_quota(group), caught=caught_signals(pid))
    return out


# glibc's own handlers for signals 32 and 33 (thread cancellation, set*id across threads), installed
# when a process starts threads; its sigaction refuses them to any other handler
_LIBC_SIGNALS = 1 << 31 | 1 << 32
# Python's own SIGINT handler, which the fork server has and every side drops before claim code
# loads (side/server.py `_default_handlers`): a side handling SIGINT is the claim's code
_PYTHON_SIGINT = 1 << 1


def allowed_handlers(server_caught: int) -> int:
    """The signals a side may handle: glibc's own, and the C-level handlers its fork server had (not
    Python's SIGINT, which every side drops before claim code loads)."""
    return (server_caught & ~_PYTHON_SIGINT) | _LIBC_SIGNALS


def handlers_problem(pid: int, extra: int) -> str:
    """Why a side process handling the signals ``extra`` cannot be timed."""
    return (f"process {pid} handles {_signal_names(extra)}, which a side may not (its fork server's inherited "
            "handlers aside): a handler runs when the harness thaws the side, outside the timed call")


def caught_signals(pid: int) -> int:
    """The process's SigCgt mask from /proc/<pid>/status: the signals it handles (0 where unreadable)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return int(line.split()[1], 16)
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _signal_names(mask: int) -> str:
    import signal

    out = []
    for n in range(1, 65):
        if mask >> (n - 1) & 1:
            try:
                out.append(signal.Signals(n).name)
            except ValueError:
                out.append(f"signal {n}")
    return ", ".join(out)


def cgroup(pid: int) -> str:
    """The process's cgroup path(s), as /proc/<pid>/cgroup lists them."""
    try:
        with open(f"/proc/{pid}/cgroup", encoding="utf-8", errors="replace") as f:
            return ";".join(line.strip() for line in f if line.strip())
    except OSError:
        return ""


def cpu_quota(group: str) -> str:
    """The CPU quota of the process's cgroup: cgroup v2's ``cpu.max`` ("max 100000" when there is
    none) or v1's "cfs_quota_us cfs_period_us" of its cpu controller; "" where neither is readable."""
    for entry in group.split(";"):
        _, controllers, path = (entry.split(":", 2) + ["", ""])[:3]
        if controllers == "":
            files = [f"/sys/fs/cgroup{path}/cpu.max", f"/sys/fs/cgroup/unified{path}/cpu.max"]
        elif "cpu" in controllers.split(","):
            files = [f"/sys/fs/cgroup/{controllers}{path}/cpu.cfs_quota_us", f"/sys/fs/cgroup/cpu{path}/cpu.cfs_quota_us"]
        else:
            continue
        for name in files:
            try:
                with open(name, encoding="ascii", errors="replace") as f:
                    quota = f.read().strip()
                if name.endswith("cfs_quota_us"):
                    with open(name.replace("cfs_quota_us", "cfs_period_us"), encoding="ascii", errors="replace") as f:
                        quota += " " + f.read().strip()
                return quota
            except OSError:
                continue
    return ""


def unlike(shapes: dict[int, ProcessShape], ref: Optional[ProcessShape]) -> list[str]:
    """Side processes whose cgroup, CPU quota or scheduling policies differ from ``ref``, the fork
    server's, where no claim code runs: a kernel that moves its rival before the reference shapes
    are taken (at import, or from a thread started then) is caught by this absolute comparison."""
    if ref is None:
        return []
    out = []
    policies = {x[0] for x in ref.sched}
    for pid, sh in sorted(shapes.items()):
        if sh.cgroup != ref.cgroup:
            out.append(f"process {pid} is in cgroup {sh.cgroup!r}, not the fork server's {ref.cgroup!r}")
        elif sh.cpu_quota != ref.cpu_quota:
            out.append(f"process {pid}'s CPU quota is {sh.cpu_quota!r}, not the fork server's {ref.cpu_quota!r}")
        if {x[0] for x in sh.sched} - policies:
            out.append(f"process {pid} has threads under scheduling policies {sorted({x[0] for x in sh.sched})}, "
                       f"the fork server {sorted(policies)}")
        if extra := sh.caught & ~allowed_handlers(ref.caught):
            # a handler runs whenever its signal arrives, and a stopped side gets SIGCONT, or a timer's
            # pending signal, the moment it is thawed for an untimed exchange, after the inputs changed:
            # a SIGCONT handler computed half of each matmul there (verified 1.89x, an adversarial review)
            out.append(handlers_problem(pid, extra))
    return out


def differences(before: dict[int, ProcessShape], after: dict[int, ProcessShape], *, pinning_only: bool = False
                ) -> list[str]:
    """What changed, in words; empty when nothing did. ``pinning_only`` compares what a side can do
    to its rival (affinity, scheduling, cgroup, quota) alone, for processes in both (the state right
    after loading, before any claim call: a first call that pins, renices or throttles its rival
    must not become the reference)."""
    out = []
    if not pinning_only:
        for pid in sorted(set(after) - set(before)):
            out.append(f"a new process {pid} appeared")
        for pid in sorted(set(before) - set(after)):
            out.append(f"process {pid} is gone")
    for pid in sorted(set(before) & set(after)):
        b, a = before[pid], after[pid]
        if a.threads != b.threads and not pinning_only:
            out.append(f"process {pid} went from {b.threads} to {a.threads} threads")
        if a.affinities != b.affinities:
            out.append(f"process {pid}'s CPU affinity changed from {_cpus(b.affinities)} to {_cpus(a.affinities)}")
        if a.nice != b.nice:
            out.append(f"process {pid}'s nice value changed from {b.nice} to {a.nice}")
        if a.sched != b.sched and not (a.nice != b.nice and {x[:2] for x in a.sched} == {x[:2] for x in b.sched}):
            out.append(f"process {pid}'s scheduling (policy, real-time priority, nice per thread) changed from "
                       f"{list(b.sched)} to {list(a.sched)}")
        if a.cgroup != b.cgroup:
            out.append(f"process {pid} moved from cgroup {b.cgroup!r} to {a.cgroup!r}")
        elif a.cpu_quota != b.cpu_quota:
            out.append(f"process {pid}'s cgroup CPU quota changed from {b.cpu_quota!r} to {a.cpu_quota!r}")
    return out


def _cpus(affs: tuple[tuple[int, ...], ...]) -> str:
    return " / ".join(",".join(map(str, a)) for a in affs) or "none"


def cpu_seconds(pids: Iterable[int]) -> float:
    """User plus system time of these processes (all their threads)."""
    total = 0.0
    for pid in pids:
        s = stat(pid)
        if s is not None:
            total += s.utime_s + s.stime_s
    return total


def rss_bytes(pids: Iterable[int]) -> int:
    """The resident memory of these processes together, in bytes: held against --max-memory between rounds."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        s = stat(pid)
        if s is not None:
            total += s.rss_pages * page
    return total


def machine_busy_s() -> tuple[float, int]:
    """(busy CPU seconds of the whole machine since boot, number of CPUs) from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            first = f.readline().split()
    except OSError:
        return 0.0, os.cpu_count() or 1
    vals = [int(x) for x in first[1:]]
    idle = vals[3] + (vals[4] if len(vals) > 4 else 0)
    busy = sum(vals[:8]) - idle
    return busy / CLK_TCK, os.cpu_count() or 1



@dataclass(frozen=True)
class LoadMark:
    """The machine's busy CPU seconds and ours at one moment: the start of a load measurement."""

    busy_s: float
    ours_s: float
    t: float
    ncpu: int


def load_mark(ours: Iterable[int]) -> LoadMark:
    """The mark `other_fraction` measures from; ``ours`` are the run's own processes, whose CPU is no load."""
    busy, ncpu = machine_busy_s()
    return LoadMark(busy, cpu_seconds(ours), time.monotonic(), ncpu)


def other_fraction(mark: LoadMark, ours: Iterable[int]) -> tuple[float, float]:
    """(the share of all cores that processes other than ``ours`` used since ``mark``, wall seconds):
    the machine's busy time minus our processes' own, over wall time times the CPUs."""
    wall = time.monotonic() - mark.t
    busy, _ = machine_busy_s()
    others = max(0.0, (busy - mark.busy_s) - (cpu_seconds(ours) - mark.ours_s))
    return others / max(wall * mark.ncpu, 1e-9), wall


def other_load_now(window_s: float = 0.5, own_root: Optional[int] = None) -> float:
    """The share of all cores that processes outside ``own_root``'s tree (default: this process)
    used over the next ``window_s``: the timed rounds' meter, taken before any claim runs, so a
    busy machine is named at the start instead of after minutes of rounds."""
    root = os.getpid() if own_root is None else own_root
    mark = load_mark(tree([root]))
    time.sleep(window_s)
    return other_fraction(mark, tree([root]))[0]
