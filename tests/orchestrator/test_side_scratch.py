"""Each side writes only where no other side reads, in every sandbox that confines writes.

Under Landlock each role has its own scratch folder (`ForkServer.scratch_for`); inside bwrap the
sides shared the sandbox's private /tmp, compiler caches included, until each also confined itself
with Landlock to a folder of its own there (`ForkServer.landlock_inside`, side/server.py
`_confine`). The probe: the kernel's side leaves a marker in every folder of /tmp it can write, and
the baseline answers wrong if one is where it keeps its own files.
"""

from __future__ import annotations

import pytest
from cheat_project import write_claim

from claimbench.machine import landlock
from claimbench.machine.detect import detect
from claimbench.options import RunOptions
from claimbench.orchestrator.sandbox import bwrap_works
from claimbench.runner import run_one
from claimbench.stats.status import Status


@pytest.mark.parametrize("sandbox", ["bwrap", "landlock"])
def test_the_kernels_side_cannot_write_where_the_baselines_side_reads(cheat_root, sandbox):
    if landlock.abi() < 1:
        pytest.skip("this kernel has no Landlock: inside bwrap the sides still share /tmp (README)")
    if sandbox == "bwrap" and not bwrap_works()[0]:
        pytest.skip(f"bwrap cannot run here: {bwrap_works()[1]}")
    path = write_claim(cheat_root, f"plant-neighbours-{sandbox}", "plant_neighbours")
    path.write_text(path.read_text().replace("kernels/softmax_cpu.py:torch_softmax",
                                             "kernels/cheat/plant_neighbours_baseline.py:baseline"))
    out = run_one(path, cheat_root, detect(cheat_root),
                  opts=RunOptions(results=cheat_root / "results", correctness_only=True, sandbox=sandbox))
    # before, inside bwrap: rejected, "the baseline disagrees with the reference"
    assert out.status == Status.SKIPPED and "checks passed" in out.reason, (out.status, out.reason, out.path)
