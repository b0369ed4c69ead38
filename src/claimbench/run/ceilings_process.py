"""Ceilings are measured in a process that never imports claim code: a kernel cannot bend the
numbers its own physics floor and sol_fraction are computed from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

_CODE = """
import json, sys
from pathlib import Path
from claimbench.ceilings import load_or_measure
from claimbench.hardware import Hardware
job = json.loads(sys.stdin.read())
c = load_or_measure(Path(job["cache"]), Hardware.from_dict(job["hardware"]), tuple(job["dtypes"]))
print(json.dumps(c.to_dict()))
"""


def run_ceilings(hardware: dict, dtypes: list[str], cache: Path, *, env_extra: dict, timeout_s: float = 300.0) -> dict:
    env = {**os.environ, **env_extra}
    proc = subprocess.run([sys.executable, "-c", _CODE], input=json.dumps(
        {"hardware": hardware, "dtypes": dtypes, "cache": str(cache)}), capture_output=True, text=True,
        timeout=timeout_s, env=env)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"measuring ceilings failed: {last}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
