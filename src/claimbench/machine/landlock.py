"""Landlock: a side confines itself, before any claim code loads, to writing only its own scratch
folder, the device nodes and its own /proc entry, and to signalling only its own processes.

Why: without bubblewrap a claim's code ran with the user's rights, so the run could only notice a
changed file afterwards and put it back, and it could not tell the claim's write from the user's
(issue 25: a run undid an edit saved in an editor meanwhile, and the ingest and publish beside it).
Landlock (Linux 5.13+, no privilege and nothing to install) makes the kernel refuse the claim's
writes instead, so whatever changes in the project during a run is somebody else's, and stays.
It also refuses writes to /sys (a cheat moved its rival into a throttled cgroup, issue 22) and,
from ABI 6, signals to processes outside the claim (its parent, the orchestrator, pytest).
Reads are not restricted: a kernel reads its own modules and the libraries it links.

The restriction cannot be lifted by the process or its children, and `confine` checks it took:
a write into the project must fail before the side says it is ready. Syscalls through ctypes,
numbers from the kernel's uapi (include/uapi/linux/landlock.h; the same on every architecture).
"""

from __future__ import annotations

import ctypes
import errno
import os
from pathlib import Path

_CREATE_RULESET, _ADD_RULE, _RESTRICT_SELF = 444, 445, 446
_VERSION = 1 << 0           # landlock_create_ruleset flag: return the ABI version
_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38

# every right that creates, changes or removes something at a path; reads and execution are left alone
_WRITE_RIGHTS_BY_ABI = (
    (1, (1 << 1) | (1 << 4) | (1 << 5) | (1 << 6) | (1 << 7) | (1 << 8) | (1 << 9) | (1 << 10) | (1 << 11) | (1 << 12)),
    (2, 1 << 13),           # refer: links and renames across folders
    (3, 1 << 14),           # truncate
    (5, 1 << 15),           # ioctl on device files (allowed under /dev)
)
_FILE_RIGHTS = (1 << 1) | (1 << 14) | (1 << 15)   # what a rule on a file (not a folder) may grant
_SCOPE_SIGNAL = 1 << 1      # ABI 6


class ConfineError(Exception):
    """The side could not confine itself: it must not run claim code (the record would say it did)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi() -> int:
    """The kernel's Landlock ABI version; 0 where it has none (older kernel, disabled, not Linux)."""
    try:
        v = _libc().syscall(_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION))
    except (OSError, AttributeError):
        return 0
    return max(0, int(v))


def _write_rights(version: int) -> int:
    return sum(bits for since, bits in _WRITE_RIGHTS_BY_ABI if version >= since)


def confine(writable: list[str], *, protected: str) -> int:
    """Restricts this process and its future children to writing beneath ``writable`` only, and
    (ABI 6+) to signalling processes of its own domain; then proves a write beneath ``protected``
    fails. Returns the ABI version used; raises ConfineError when any step fails."""
    version = abi()
    if version < 1:
        raise ConfineError("this kernel has no Landlock (Linux 5.13 or later, with landlock in the lsm= list)")
    libc, handled = _libc(), _write_rights(version)
    attr = _RulesetAttr(handled, 0, _SCOPE_SIGNAL if version >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if version >= 6 else 8  # an older kernel refuses fields it does not know
    rs = libc.syscall(_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if rs < 0:
        raise ConfineError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path in writable:
            _allow(libc, rs, path, handled=handled)
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise ConfineError(f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")
        if libc.syscall(_RESTRICT_SELF, ctypes.c_int(rs), ctypes.c_uint32(0)) != 0:
            raise ConfineError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(rs)
    _prove(protected)
    return version


def _allow(libc: ctypes.CDLL, rs: int, path: str, *, handled: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENOENT:
            return  # nothing there to write beneath
        raise ConfineError(f"cannot open {path} for a rule: {e.strerror}") from None
    try:
        rights = handled if Path(path).is_dir() else handled & _FILE_RIGHTS
        rule = _PathBeneath(rights, fd)
        if libc.syscall(_ADD_RULE, ctypes.c_int(rs), ctypes.c_int(_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise ConfineError(f"landlock_add_rule {path}: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


def _prove(protected: str) -> None:
    probe = os.path.join(protected, f".claimbench-confine-probe-{os.getpid()}")
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except PermissionError:
        return  # refused, as it must be
    except OSError as e:
        if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            return
        raise ConfineError(f"the write probe under {protected} failed unexpectedly: {e.strerror}") from None
    os.close(fd)
    os.unlink(probe)
    raise ConfineError(f"Landlock was applied but a write under {protected} still succeeded")
