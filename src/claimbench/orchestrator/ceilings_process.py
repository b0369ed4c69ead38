"""Ceilings are measured in a process that never imports claim code: a kernel cannot bend the
numbers its own physics floor and sol_fraction are computed from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable


def run_ceilings(hardware: dict, dtypes: list[str], cache: Path, *, env_extra: dict, timeout_s: float = 600.0,
                 progress: Callable[[str], None] = lambda line: None) -> dict:
    """`python -m claimbench.machine.ceilings`, its progress lines passed on as they come."""
    env = {**os.environ, **env_extra}
    with subprocess.Popen([sys.executable, "-m", "claimbench.machine.ceilings"], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env) as proc:
        # the `with` closes all three pipes: left to the garbage collector they raised a
        # ResourceWarning at whatever test ran then (an error under filterwarnings=error)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None  # all three are PIPEs
        proc.stdin.write(json.dumps({"hardware": hardware, "dtypes": dtypes, "cache": str(cache)}))
        proc.stdin.close()
        last = ""
        deadline = time.monotonic() + timeout_s
        for line in proc.stderr:
            last = line.strip() or last
            if last:
                progress(last)
            if time.monotonic() > deadline:
                proc.kill()
                break
        out = proc.stdout.read()
        if proc.wait() != 0:
            raise RuntimeError(f"measuring ceilings failed: {last or 'no output'}")
    return json.loads(out.strip().splitlines()[-1])
