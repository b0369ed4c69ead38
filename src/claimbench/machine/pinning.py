"""A side may not change which CPUs its threads run on, nor leave its session: a seccomp filter, set in
each side before its claim's code loads, answers `sched_setaffinity` and `setsid` with EPERM (and, in a
CPU side, the calls that make what fires while it is stopped).

Why: the orchestrator pins a CPU claim's kernel and baseline to the same cores (`orchestrate.side_cpus`)
and reads every thread's affinity between rounds, while the side is stopped. In an adversarial review
(2026-12-06) a helper thread, started at import by a C module that torch's extension loader built,
moved itself to the core the side was not given at the start of every call, multiplied part of A
there, and moved back before the call returned, so every look saw it pinned: an honest matmul was
verified at 1.85x with 1.76 cores used (`sidecore_mm`). The static rules refuse `sched_setaffinity` in
Python source only. The orchestrator pins from outside, which the filter does not touch, and a thread a
side starts inherits both its mask and the filter.

Every side is also refused `bpf`, `perf_event_open` and new namespaces, and a CPU side the calls that
reach into another process (`ptrace`, `process_vm_readv`, `process_vm_writev`, `pidfd_getfd`): see
`_AGENTS`, `_NAMESPACES` and `_REACH`.

The filter covers the native ABI of x86_64 (and its x32 numbers) and aarch64, and the 32-bit x86 ABI a
64-bit process can still reach with `int 0x80`. Elsewhere nothing is installed and `install` says so.
"""

from __future__ import annotations

import ctypes
import errno
import platform

_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
_RET_ALLOW, _RET_ERRNO = 0x7FFF0000, 0x00050000
_LD_ABS_W, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_ARCH_AT, _NR_AT = 4, 0  # offsets in struct seccomp_data
# (audit arch, the numbers of sched_setaffinity and setsid under it). A side is its own session from
# its start (side/server.py calls setsid before this filter), and every process of that session is the
# side's (`SideProcess.members`): a helper cloned with CLONE_PARENT (so outside the side's tree) that
# called setsid ran beside the baseline while the kernel was stopped, and no census counted it (1.89x
# verified, `ghost_hog`: an adversarial review). setpgid stays allowed: ninja puts each compile in a
# group of its own (torch's extension loader), and a group cannot leave its session.
_X86_64 = (0xC000003E, tuple(n | x32 for n in (203, 112) for x32 in (0, 0x40000000)))
_I386 = (0x40000003, (241, 66))
_AARCH64 = (0xC00000B7, (122, 157))
_DENY = {"x86_64": (_X86_64, _I386), "aarch64": (_AARCH64,)}
# No side may leave work to the kernel that runs on another task's time: a BPF program attached at import
# to a CPU-wide software perf event (the cpu-clock on the side's core, every millisecond) ran in the
# event's interrupt whoever ran there, and spun 0.4 ms whenever the interrupted thread was not the
# kernel's own (it read the thread's name): charged to the baseline on a kernel without IRQ time
# accounting, the interrupt rate the same for both sides, no descriptor of a kind `wakers.py` names,
# nothing running while the side was stopped: an honest matmul verified at 1.594-1.621x, four runs of
# four, two of them with three processes (`bpf_storm`, an adversarial review, 2026-12-06; the sides ran
# as root). Numbers by audit arch: bpf, perf_event_open. Neither torch, Triton, CUDA nor NCCL needs them
# in a side (CUPTI and torch's profiler do not go through perf_event_open); not yet run on a GPU.
_AGENTS = {
    0xC000003E: tuple(n | x32 for n in (321, 298) for x32 in (0, 0x40000000)),
    0x40000003: (357, 336),
    0xC00000B7: (280, 241),
}
# A CPU side may not reach into another process: ptrace, process_vm_readv, process_vm_writev and
# pidfd_getfd (a sibling side's memory holds the reference's answer and the baseline's operands). Under
# Landlock, each side a domain of its own, the kernel already refuses them across sides; with no sandbox
# (`--sandbox none`) only this refuses them (opening /proc/PID/mem is not a call it can refuse: README,
# "What a run does not catch"). A GPU side keeps them: NCCL shares CUDA memory handles between ranks
# with pidfd_getfd. The orchestrator's own reads and writes of a side's memory come from outside.
_REACH = {
    0xC000003E: tuple(n | x32 for n in (101, 310, 311, 438) for x32 in (0, 0x40000000))
    + tuple(0x40000000 | n for n in (521, 539, 540)),
    0x40000003: (26, 347, 348, 438),
    0xC00000B7: (117, 270, 271, 438),
}
# A CPU side may not make what fires while it is stopped: timerfd_create, signalfd, signalfd4,
# io_uring_setup, io_setup (AIO completions can wake an eventfd), inotify_init, inotify_init1 and
# fanotify_init. Their expiries and wake-ups run on the core the side shares with the other, charged
# to whichever is timed there: 4,500 epoll instances on each of 120 timers made every expiry 1 ms of
# the baseline's time (`epoll_storm`, 2.05x verified), and reading the descriptor table to find them
# was gone around by parking them in a socket's in-flight message or an io_uring's file table
# (`scm_storm`, `uring_storm`: an adversarial review). None of torch, Triton or claimbench's side code
# makes one. Numbers by ABI (x32's AIO setup has its own, 543).
# And since protocol 12 the interval timers and POSIX timers too (alarm, setitimer, timer_create): a third
# review found `setitimer(ITIMER_REAL)` left to a stopped side, unseen by `wakers.py` (which reads POSIX
# timers only); it found no way to multiply an expiry's cost, but it is a source that fires while the side
# is stopped, which this list exists to refuse.
_EVENT_SOURCES = {
    0xC000003E: tuple(n | x32 for n in (283, 282, 289, 425, 206, 253, 294, 300, 37, 38) for x32 in (0, 0x40000000))
    + (0x40000000 | 543, 222, 0x40000000 | 526),
    0x40000003: (322, 321, 327, 425, 245, 291, 332, 338, 27, 104, 259),
    0xC00000B7: (85, 74, 425, 0, 26, 262, 103, 107),
}


# No side may make a namespace (unshare, setns, clone with a CLONE_NEW* flag; clone3, whose flags a filter
# cannot read, answers ENOSYS, so the C library falls back to clone): a new user namespace holds every
# capability over what it makes, whatever the side dropped. In an adversarial review of protocol 11 a child
# the kernel's C module forked at import made a user and network namespace, put a rate limiter on its
# loopback and 40,000 filters that never match, and from then on a few hundred datagrams sent before each
# baseline run were released one by one from the limiter's timer, each walking the filters in softirq on
# the timed core: about 1 ms of the baseline's time per packet, 1.60-1.66x verified for an honest 1.0x
# (`tbf_trickle`). Numbers by audit arch: (unshare, setns), clone, clone3.
_NAMESPACES = {0xC000003E: (tuple(n | x32 for n in (272, 308) for x32 in (0, 0x40000000)), (56, 0x40000000 | 56),
                            (435, 0x40000000 | 435)),
               0x40000003: ((310, 346), (120,), (435,)),
               0xC00000B7: ((97, 268), (220,), (435,))}
_CLONE_NEW = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
_ARG0_LOW = 16  # seccomp_data.args[0], its low 32 bits (little-endian), where clone takes its flags
_AND_K = 0x54


class _Filter(ctypes.Structure):
    _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]


class _Prog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Filter))]


def program(machine: str, *, event_sources: bool = False) -> list[tuple[int, int, int, int]]:
    """The filter's instructions for ``machine`` (`platform.machine()`), empty where none is known;
    ``event_sources``: deny those and the cross-process calls too (a CPU side's)."""
    groups = _DENY.get(machine, ())
    if not groups:
        return []
    out: list[tuple[int | str, int | str, int | str, int]] = []  # a str code is a label; a str jump, its target
    for g, (arch, base) in enumerate(groups):
        spaces, clones, clone3 = _NAMESPACES[arch]
        nrs = base + _AGENTS.get(arch, ()) + spaces \
            + ((_EVENT_SOURCES.get(arch, ()) + _REACH.get(arch, ())) if event_sources else ())
        out.append((_LD_ABS_W, 0, 0, _ARCH_AT))
        out.append((_JEQ_K, 0, f"next{g}", arch))  # another arch: the next group
        out.append((_LD_ABS_W, 0, 0, _NR_AT))
        out += [(_JEQ_K, "enosys", 0, nr) for nr in clone3]
        out += [(_JEQ_K, f"clone{g}", 0, nr) for nr in clones]
        out += [(_JEQ_K, "deny", 0, nr) for nr in nrs]
        out.append((_RET_K, 0, 0, _RET_ALLOW))
        out.append((f"clone{g}", 0, 0, 0))  # a label
        out.append((_LD_ABS_W, 0, 0, _ARG0_LOW))
        out.append((_AND_K, 0, 0, _CLONE_NEW))
        out.append((_JEQ_K, 0, "deny", 0))  # no namespace flag: allow (next), else deny
        out.append((_RET_K, 0, 0, _RET_ALLOW))
        out.append((f"next{g}", 0, 0, 0))
    out.append((_RET_K, 0, 0, _RET_ALLOW))  # another arch
    out.append(("deny", 0, 0, 0))
    out.append((_RET_K, 0, 0, _RET_ERRNO | errno.EPERM))
    out.append(("enosys", 0, 0, 0))
    out.append((_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS))
    at: dict[str, int] = {}
    insns: list[tuple[int, int | str, int | str, int]] = []
    for code, jt, jf, k in out:
        if isinstance(code, str):
            at[code] = len(insns)
        else:
            insns.append((code, jt, jf, k))

    def off(i: int, to: int | str) -> int:
        return at[to] - i - 1 if isinstance(to, str) else to

    return [(code, off(i, jt), off(i, jf), k) for i, (code, jt, jf, k) in enumerate(insns)]


def install(*, event_sources: bool = False) -> str:
    """Deny `sched_setaffinity` and `setsid` (and with ``event_sources`` those) to this process and every thread and process it
    starts from now on; "" when done,
    else why not (a machine with no known numbers, or a kernel that refused the filter)."""
    insns = program(platform.machine(), event_sources=event_sources)
    if not insns:
        return f"no seccomp filter for {platform.machine()}: a side could move its threads to other CPUs"
    arr = (_Filter * len(insns))(*[_Filter(*x) for x in insns])
    prog = _Prog(len(insns), arr)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 \
            or libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        return f"the seccomp filter was refused: {errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())}"
    return ""
