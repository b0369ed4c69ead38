"""A claim's bytes are what its work must move (issue 22: "bytes that are never read").

Through the real runner: a GB/s claim whose `bytes` counts an input the kernel never reads is
rejected at its first check, naming the input, whatever the cache size (the 40 MB input of the
issue fitted in twice the cache, where no memory floor applies); the same claim counting only x
and y passes its checks. Unit cases cover the arithmetic and a reduction that hides most changes.
"""

from __future__ import annotations

import pytest
from cheat_project import UNREAD, write_claim

from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.runner import run_one
from claimbench.stats.status import Status as S

COUNTS_PAD = "4 * rows * cols + 4 * pad + 4 * rows * cols"
HONEST = "4 * rows * cols + 4 * rows * cols"


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_bytes_counting_an_unread_input_are_rejected(cheat_root, cheat_servers, device):
    path = write_claim(cheat_root, f"unread-input-{device}", "unread_input", template=UNREAD, bytes=COUNTS_PAD,
                       value="50", device=device)
    opts = RunOptions(results=cheat_root / "results", timeout_s=180.0, threads=1, timing=TimingLimits(max_time_s=1.0))
    out = run_one(path, cheat_root, detect(cheat_root), opts=opts, servers=cheat_servers)
    assert out.status == S.REJECTED, out.reason
    assert "workload.bytes counts" in out.reason and "input 1 (float32 [5000]) never changed" in out.reason, out.reason


def test_bytes_counting_what_the_work_moves_pass(cheat_root, cheat_servers):
    """The control: checked on this CPU as a GPU claim (correctness only), no rejection."""
    path = write_claim(cheat_root, "unread-input-honest", "unread_input", template=UNREAD, bytes=HONEST,
                       value="50", device="cuda")
    opts = RunOptions(results=cheat_root / "results", timeout_s=180.0, threads=1)
    out = run_one(path, cheat_root, detect(cheat_root), opts=opts, servers=cheat_servers)
    assert out.status == S.SKIPPED and "checks passed" in out.reason, out.reason
