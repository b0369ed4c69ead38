"""A side drops every capability before its claim's code loads (`machine/privileges.py`), tried in a
forked child as a side does it, with what a program it starts holds."""

from __future__ import annotations

import os
import subprocess

import pytest

from claimbench.machine import pinning, privileges


def _caps(text: str) -> dict:
    return {line.split(":")[0]: int(line.split()[1], 16) for line in text.splitlines() if line.startswith("Cap")}


@pytest.mark.skipif(privileges.held("CapEff") == 0, reason="this process holds no capability, so there is none to drop")
def test_a_side_holds_no_capability_and_nothing_it_starts_regains_one():
    """As root a side held them all: `bpf_storm` loaded a BPF program that the machine's sysctls refuse to a
    process without CAP_BPF and CAP_PERFMON. A program the side runs as root regains nothing either."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            why = pinning.install() or privileges.drop()  # the side's order: the filter (no_new_privs), then this
            status = subprocess.run(["cat", "/proc/self/status"], capture_output=True, text=True).stdout if not why else ""
            os.write(w, (why or status).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said = f.read()
    os.waitpid(pid, 0)
    caps = _caps(said)
    assert caps, said
    assert caps["CapEff"] == caps["CapPrm"] == caps["CapInh"] == caps["CapAmb"] == 0, caps
    assert caps["CapBnd"] == 0, caps


@pytest.mark.skipif(privileges.held("CapEff") == 0, reason="this process holds no capability for a side to inherit")
def test_claim_code_in_a_side_holds_no_capability(tmp_path, monkeypatch):
    """Through the runner, as `claimbench run` starts a side: `caps_probe` answers wrong when its side
    holds any capability (effective, permitted or bounding). Before, as root, it held them all."""
    from cheat_project import make_project, write_claim

    from claimbench.gate import policy
    from claimbench.machine.detect import detect
    from claimbench.options import RunOptions
    from claimbench.runner import run_one
    from claimbench.stats.status import Status

    monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])  # it reads /proc, as a probe must
    project = make_project(tmp_path / "proj")
    claim = write_claim(project, "caps-probe", "caps_probe")
    out = run_one(claim, project, detect(project), opts=RunOptions(results=project / "results", correctness_only=True))
    assert out.status == Status.SKIPPED and "checks passed" in out.reason, (out.status, out.reason)
