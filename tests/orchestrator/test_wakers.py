"""orchestrator/wakers.py: what a side holds that fires while it is stopped, read from /proc."""

from __future__ import annotations

import ctypes
import os
import signal

import pytest

from claimbench.orchestrator import wakers

libc = ctypes.CDLL(None, use_errno=True)
linux = pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads /proc")


@linux
def test_timer_signal_and_watch_descriptors_and_posix_timers_are_counted_and_closed_ones_are_not():
    assert wakers.sources(os.getpid()) == {}  # this test process, like a side after torch and Triton: none
    fds = [libc.timerfd_create(1, 0), libc.timerfd_create(1, 0), libc.inotify_init1(0)]
    mask = ctypes.c_uint64(1 << (signal.SIGUSR2 - 1))
    fds.append(libc.signalfd(-1, ctypes.byref(mask), 0))
    timer = ctypes.c_void_p()
    assert libc.timer_create(1, None, ctypes.byref(timer)) == 0
    try:
        assert all(fd >= 0 for fd in fds), ctypes.get_errno()
        assert wakers.sources(os.getpid()) == {"timer": 2, "inotify": 1, "signal": 1, "posix timer": 1}
        (line,) = wakers.problems({"kernel": [os.getpid()], "baseline": [os.getpid()]})
        assert line.startswith(f"the kernel side (pid {os.getpid()}) holds 1 inotify, 1 posix timer, 1 signal, 2 timers")
    finally:
        for fd in fds:
            if fd >= 0:
                os.close(fd)
        libc.timer_delete(timer)
    assert wakers.sources(os.getpid()) == {}


def test_a_process_that_is_gone_holds_nothing():
    assert wakers.sources(2**22 + 12345) == {}
