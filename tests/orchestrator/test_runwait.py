"""orchestrator/runwait.py: the time a CPU side's threads waited for a core in its timed calls, and the
blocker when the baseline waited for a larger share than the kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from claimbench.orchestrator import runwait


def test_an_honest_pair_waits_alike_and_a_baseline_kept_from_its_core_does_not():
    wall = {"kernel": 250_000.0, "baseline": 250_000.0}
    assert runwait.blocker({"kernel": 1_120.0, "baseline": 216.0}, wall) == ""  # an honest matmul, measured here
    assert runwait.blocker({"kernel": 100_000.0, "baseline": 120_000.0}, wall) == ""  # a busy machine: both alike
    why = runwait.blocker({"kernel": 500.0, "baseline": 110_000.0}, wall)  # `ghost_hog`: half the baseline's core
    assert "waited for a core for 44% of its timed calls, the kernel's for 0%" in why
    assert "could not be read" in runwait.blocker({"kernel": 1.0, "baseline": None}, wall)


@pytest.mark.skipif(not os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/schedstat"), reason="no schedstat")
def test_a_process_sharing_its_core_with_a_spinner_is_seen_waiting():
    """The scheduler's own account: a process pinned beside a spinner on one core waits about half the time."""
    code = ("import os, time; os.sched_setaffinity(0, {0}); e = time.monotonic() + 3\n"
            "while time.monotonic() < e: pass")
    spinner = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.3)  # the spinner is pinned and running
        me = os.getpid()
        before_cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(0, {0})
        try:
            w0 = runwait.waited_ns(me)
            end = time.monotonic() + 0.5
            while time.monotonic() < end:
                pass
            w1 = runwait.waited_ns(me)
        finally:
            os.sched_setaffinity(0, before_cpus)
    finally:
        spinner.kill()
        spinner.wait()
    assert w0 is not None and w1 is not None and w1 - w0 > 50_000_000, (w0, w1)  # 50 ms of the 500 at least
    assert runwait.waited_ns(2**22 + 12345) is None
