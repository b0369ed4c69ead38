"""A side holds no capabilities: every one is dropped, from the bounding set too, before its claim's code
loads.

Why: a claim's code needs none, and run as root (CI runners, containers, this project's machines) a side
held all of them. An adversarial review (2026-12-06) used that: a kernel loaded a BPF program onto a
CPU-wide perf event on its core, which the kernel's sysctls (`perf_event_paranoid` 2,
`unprivileged_bpf_disabled` 2) refuse to any process without CAP_PERFMON and CAP_BPF, and the program's
work in the baseline's time verified an honest matmul at 1.6x (`bpf_storm`; `machine/pinning.py` now
refuses both calls as well). Without capabilities, root in a side cannot load kernel code, change the
machine's settings or bypass file permissions, whatever the filter misses. The bounding set goes first
(it needs CAP_SETPCAP), so no program a side starts regains a capability; the side has set no_new_privs
already (the filter), so no setuid binary does either. A side of a user without capabilities has
nothing to drop, and its bounding set stays as it is (no program it starts can use it).
"""

from __future__ import annotations

import ctypes
import os

_PR_CAPBSET_DROP, _PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 24, 47, 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_CAP_SETPCAP = 8


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def held(field: str = "CapEff", status: str = "/proc/self/status") -> int:
    """The capability mask ``field`` (CapEff, CapPrm, CapInh, CapBnd, CapAmb) of this process."""
    with open(status, encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    raise OSError(f"{status} has no {field} line")


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 63


def drop() -> str:
    """Drop every capability of this process (bounding set, ambient, effective, permitted, inheritable);
    "" when none is left, else why not."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        if held("CapEff") >> _CAP_SETPCAP & 1:
            for cap in range(_last_cap() + 1):
                if libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:  # EINVAL: unknown here
                    return f"prctl(PR_CAPBSET_DROP, {cap}): {os.strerror(ctypes.get_errno())}"
        libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)  # EINVAL before Linux 4.3: none to clear
        header, data = _Header(_LINUX_CAPABILITY_VERSION_3, 0), (_Data * 2)()
        if libc.capset(ctypes.byref(header), data) != 0:
            return f"capset: {os.strerror(ctypes.get_errno())}"
        left = {name: held(name) for name in ("CapEff", "CapPrm", "CapInh", "CapAmb")}
    except OSError as e:
        return f"could not read this process's capabilities: {e}"
    still = [f"{name} {mask:#x}" for name, mask in left.items() if mask]
    return f"capabilities still held: {', '.join(still)}" if still else ""
