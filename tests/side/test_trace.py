"""The side's dispatch trace sees forbidden ops however they are reached (evidence, not the guarantee)."""

import subprocess
import sys
import threading
import time

import torch

from claimbench.side import trace


def baseline(x):
    return torch.softmax(x, -1)


def _traced(fn, x, forbidden=("torch.softmax",)):
    return trace.traced_call(lambda: fn(x), forbidden=list(forbidden), baseline_code=baseline.__code__)


def test_trace_sees_forbidden_op_through_getattr_and_torch_ops():
    x = torch.randn(4, 8)
    for fn in (lambda t: getattr(torch, "soft" + "max")(t, -1),
               lambda t: torch.ops.aten._softmax.default(t, -1, False),
               lambda t: t.softmax(-1)):
        _, problems, ops = _traced(fn, x)
        assert any("softmax" in p for p in problems), (problems, ops)


def test_trace_sees_the_baseline_called_and_passes_honest_code():
    x = torch.randn(4, 8)
    _, problems, _ = _traced(lambda t: baseline(t), x, forbidden=())
    assert any("baseline" in p for p in problems)

    def honest(t):
        e = torch.exp(t - t.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)
    assert _traced(honest, x)[1] == []


def test_threads_left_running_are_reported():
    def leaves_thread(t):
        threading.Thread(target=time.sleep, args=(0.5,), name="straggler").start()
        return t + 1
    _, problems, _ = _traced(leaves_thread, torch.ones(2), forbidden=())
    assert any("straggler" in p for p in problems)


def test_forbidden_op_aliases():
    assert {"mm", "addmm"} <= trace.forbidden_ops(["torch.matmul"])
    assert "_softmax" in trace.forbidden_ops(["torch.nn.functional.softmax"])


def test_tracing_does_not_import_dynamo():
    """Importing torch._dynamo costs a second per side process; the trace must not need it."""
    code = ("import sys, torch\nfrom claimbench.side import trace\ntrace.prime()\n"
            "out, probs, ops = trace.traced_call(lambda: torch.ones(2, 2).softmax(-1), forbidden=['torch.softmax'])\n"
            "assert probs and '_softmax' in ops, (probs, ops)\n"
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_compiled_kernel_is_still_traced():
    compiled = torch.compile(lambda x: x * 2 + 1)
    _, problems, ops = _traced(compiled, torch.ones(3), forbidden=("torch.mul",))
    assert "mul" in ops and any("aten::mul" in p for p in problems)


def test_a_compiled_kernel_compiles_after_its_traced_call():
    """Under the trace's dispatch mode Dynamo runs the kernel eagerly and marks its code never to compile:
    a kernel calling `torch.compile` ran eagerly in every timed call after. Both ways the kernel side can
    meet it: Dynamo first imported by the kernel's traced call (a compile at first call), and Dynamo
    imported already. Each time the next untraced call compiles the function (one frame, no more); the
    recorder itself is never compiled (it was, one graph per aten op). What is at stake is Dynamo's, so
    its `eager` backend stands in for Inductor: no C++ compiler, 6 s here instead of 12."""
    code = """
import sys, torch
from claimbench.side import trace
def f1(x):
    return (x * 2).exp()
def f2(x):
    return (x + 1).sin()
holder = {}
def lazy(x):  # torch.compile at the first call, as compiled_softmax.py does
    holder.setdefault("c", torch.compile(f1, backend="eager", dynamic=False))
    return holder["c"](x)
x = torch.ones(8)
assert "torch._dynamo" not in sys.modules
_, probs, ops = trace.traced_call(lambda: lazy(x), forbidden=[])
assert ops == ["exp", "mul"], ops
from torch._dynamo.utils import counters
assert counters["frames"]["ok"] == 0, dict(counters["frames"])  # the recorder was compiled per op before
lazy(torch.ones(5))
assert counters["frames"]["ok"] == 1, dict(counters["frames"])  # it stayed eager (0) before
c2 = torch.compile(f2, backend="eager", dynamic=False)
_, probs, ops = trace.traced_call(lambda: c2(x), forbidden=[])
assert ops == ["add", "sin"], ops
c2(torch.ones(5))
assert counters["frames"]["ok"] == 2, dict(counters["frames"])
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-3000:]
