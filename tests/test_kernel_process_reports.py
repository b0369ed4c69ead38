"""Issue 22's families where the kernel's process speaks for the harness, through the real runner.

Whatever the side reports is written in the kernel's own process, so a kernel can rewrite it (the
fixtures patch the side's code in place; a relay `dup2`-ed onto the side's channel does the same
from outside it). Each fixture reached `verified` before the fix (figures in its docstring) and
runs here with the static rules on and off:
- a forged output location: a 1-element dummy reported as the input's pages under transposed
  strides, with the dummy's storage for the alias check;
- a forbidden op under another spelling (`torch.special.softmax`) with the trace's findings
  deleted from the reply.
The claimed values are ones any correct kernel clears, so a cheat is caught for what it does.
"""

from __future__ import annotations

import pytest
from cheat_project import SOFTMAX, TRANSPOSE, write_claim

from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.runner import run_one
from claimbench.stats.status import Status as S

TIMING = {"max_time_s": 0.5, "warmup_s": 0.05}
CASES = {
    # (template, extra fields, statuses it may end in with the rules off, and the reason's start)
    "forged_location": (TRANSPOSE, {"value": "1.5"}, {S.REJECTED}, "the kernel's output"),
    "forbidden_alias_relay": (SOFTMAX, {"params": "{rows: 256, cols: 2000}"}, {S.REJECTED}, "the kernel ran forbidden"),
}


@pytest.mark.parametrize("rules", ["rules-on", "rules-off"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_what_the_kernels_process_reports_is_not_evidence(cheat_root, cheat_servers, name, rules, monkeypatch):
    template, extra, allowed, why = CASES[name]
    if rules == "rules-off":
        from claimbench.gate import policy
        monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])
    path = write_claim(cheat_root, f"{name.replace('_', '-')}-{rules}", name, template=template, **extra)
    opts = RunOptions(results=cheat_root / "results", timeout_s=180.0, threads=1, timing=TimingLimits(**TIMING))
    out = run_one(path, cheat_root, detect(cheat_root), opts=opts, servers=cheat_servers)
    assert out.status != S.VERIFIED, f"{name}: {out.reason}"
    if rules == "rules-on":
        assert out.status == S.REJECTED and out.reason.startswith("policy"), (out.status, out.reason)
    else:
        assert out.status in allowed and why in out.reason, (out.status, out.reason)
