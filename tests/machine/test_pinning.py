"""The seccomp filter that keeps a side's threads on the CPUs the orchestrator gave it
(`machine/pinning.py`), tried in a forked child as a side installs it."""

from __future__ import annotations

import os
import platform
import threading

import pytest

from claimbench.machine import pinning


def test_each_known_machine_has_a_program_and_its_jumps_land_inside_it():
    for machine in ("x86_64", "aarch64"):
        insns = pinning.program(machine)
        assert insns and insns[-1][3] & 0xFFFF0000 == 0x00050000  # the deny, last
        for i, (code, jt, jf, _k) in enumerate(insns):
            if code == 0x15:
                assert i + 1 + max(jt, jf) < len(insns), (machine, i)
    assert pinning.program("sparc64") == []


@pytest.mark.skipif(platform.machine() not in ("x86_64", "aarch64") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs a machine the filter knows and two CPUs")
def test_after_install_no_thread_can_change_its_cpus_and_others_still_can():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child installs it, as a side does after its fork
        code = 1
        try:
            out: list[str] = []
            if pinning.install() == "":
                def move():
                    try:
                        os.sched_setaffinity(0, {0})
                        out.append("moved")
                    except PermissionError:
                        out.append("refused")
                t = threading.Thread(target=move)
                t.start()
                t.join()
                move()
                code = 0 if out == ["refused", "refused"] else 2
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    assert got == bytes([0]), got
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, before)  # this process, which installed nothing, still can
