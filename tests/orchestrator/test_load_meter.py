"""The load meter knows its own: every rank's processes are the run's, not other load (issue 25)."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

from claimbench.orchestrator import orchestrate


def test_every_process_under_the_launching_run_counts_as_ours(monkeypatch):
    # this test process stands for the launching `claimbench run`; the child for another rank
    other_rank = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        session = SimpleNamespace(members=lambda: {"kernel": [11], "baseline": [12]},
                                  server=SimpleNamespace(host_pid=10))
        monkeypatch.delenv(orchestrate.RUN_PID_ENV, raising=False)
        assert other_rank.pid not in orchestrate._own_processes(session)  # one rank: its own tree only
        monkeypatch.setenv(orchestrate.RUN_PID_ENV, str(os.getpid()))
        ours = orchestrate._own_processes(session, me=1)  # this rank's orchestrator is not the launcher
        assert other_rank.pid in ours and {10, 11, 12} <= set(ours)
    finally:
        other_rank.kill()
        other_rank.wait()


def test_the_load_before_a_run_counts_a_stranger_and_not_our_own_children():
    """`run` names a busy machine at its start (issue 26) with this meter: a spinning process of
    ours is our own work; the same spinner detached from our tree is other load."""
    from claimbench.orchestrator.census import other_load_now

    spin = "while :; do :; done"
    ours = subprocess.Popen(["sh", "-c", spin])
    try:
        mine = other_load_now(1.0)
    finally:
        ours.kill()
        ours.wait()
    # a stranger: started by a shell that exits at once, so the spinner is reparented out of our tree
    pidfile = subprocess.run(["sh", "-c", f"({spin}) >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True).stdout.strip()
    stranger = int(pidfile)
    try:
        other = other_load_now(1.0)
    finally:
        os.kill(stranger, 9)
    cores = os.cpu_count() or 1
    # the stranger keeps one core busy: about 1/cores of the machine, on top of whatever else runs
    assert other >= 0.6 / cores, (other, mine)
    assert other > mine or mine > 0.6 / cores  # a busy CI neighbour may load the machine in both windows
