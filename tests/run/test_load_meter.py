"""The load meter knows its own: every rank's processes are the run's, not other load (issue 25)."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

from claimbench.run import orchestrate


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
