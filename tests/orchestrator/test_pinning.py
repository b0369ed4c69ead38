"""`--threads N` is a limit, not a setting: kernel and baseline are pinned to the same N CPUs, and a
side found allowed on more is a rejection."""

from __future__ import annotations

import os
import threading
from types import SimpleNamespace

import pytest

from claimbench.orchestrator import census
from claimbench.orchestrator.orchestrate import side_cpus

MINE = sorted(os.sched_getaffinity(0))


@pytest.mark.parametrize("device, threads, want", [
    ("cpu", None, None), ("cuda", 1, None), ("cpu", len(MINE), None), ("cpu", len(MINE) + 4, None),
])
def test_no_limit_pins_nothing(device, threads, want):
    assert side_cpus(SimpleNamespace(device=device, threads=threads)) is want


@pytest.mark.skipif(len(MINE) < 2, reason="one CPU here: nothing to pin below it")
def test_fewer_threads_than_cpus_take_the_last_ones():
    assert side_cpus(SimpleNamespace(device="cpu", threads=1)) == frozenset(MINE[-1:])


@pytest.mark.skipif(len(MINE) < 2, reason="one CPU here: nothing to pin below it")
def test_pin_holds_every_thread_and_outside_names_one_that_widened():
    """Pinned threads stay inside; a thread that widens itself afterwards is named."""
    import subprocess
    import sys

    child = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                              "t = threading.Thread(target=time.sleep, args=(30,)); t.start(); time.sleep(30)"])
    try:
        for _ in range(100):
            if len(census.threads(child.pid)) >= 2:
                break
            threading.Event().wait(0.05)
        cpus = frozenset(MINE[-1:])
        census.pin([child.pid], cpus)
        shapes = census.shape([child.pid])
        assert all(set(a) <= cpus for a in shapes[child.pid].affinities) and census.outside(shapes, cpus) == []
        os.sched_setaffinity(census.threads(child.pid)[-1], set(MINE))
        (why,) = census.outside(census.shape([child.pid]), cpus)
        assert f"process {child.pid}" in why and "beyond the 1 it was given" in why
        assert census.outside(census.shape([child.pid]), None) == []
    finally:
        child.kill()
        child.wait()
