"""A side whose code calls `torch.compile` runs through the real runner, confined, and is not
refused for Inductor's compile threads (side/server.py `_one_compile_thread`)."""

from __future__ import annotations

import shutil

import pytest
from cheat_project import make_project, write_claim

from claimbench.options import RunOptions
from claimbench.runner import run_one
from claimbench.stats.status import Status


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                    reason="Inductor's CPU backend needs a C++ compiler")
def test_a_compiled_kernel_is_checked_not_refused_for_its_compile_threads(tmp_path):
    from claimbench.machine.detect import detect

    project = make_project(tmp_path / "proj")
    shutil.copy(project / "kernels" / "compiled_softmax.py", project / "kernels" / "cheat" / "compiled_softmax.py")
    claim = write_claim(project, "compiled-softmax", "compiled_softmax", title="compiled")
    out = run_one(claim, project, detect(project),
                  opts=RunOptions(results=project / "results", correctness_only=True, sandbox="auto"))
    # before: rejected, "left thread 'ThreadPoolExecutor-1_0' running after returning"
    assert out.status == Status.SKIPPED and "checks passed" in out.reason, out.reason
