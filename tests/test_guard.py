"""guard: the dispatch trace sees forbidden ops however they are reached; snapshots see patches."""

import threading
import time

import torch

from claimbench import guard


def baseline(x):
    return torch.softmax(x, -1)


def test_trace_sees_forbidden_op_through_getattr_and_torch_ops():
    x = torch.randn(4, 8)
    for fn in (lambda t: getattr(torch, "soft" + "max")(t, -1),
               lambda t: torch.ops.aten._softmax.default(t, -1, False),
               lambda t: t.softmax(-1)):
        _, problems, ops = guard.traced_call(fn, (x,), forbidden=["torch.softmax"], baseline=baseline)
        assert any("_softmax" in p or "softmax" in p for p in problems), (problems, ops)


def test_trace_sees_the_baseline_called_and_passes_honest_code():
    x = torch.randn(4, 8)
    _, problems, _ = guard.traced_call(lambda t: baseline(t), (x,), forbidden=[], baseline=baseline)
    assert any("baseline" in p for p in problems)

    def honest(t):
        e = torch.exp(t - t.amax(-1, keepdim=True))
        return e / e.sum(-1, keepdim=True)
    _, problems, _ = guard.traced_call(honest, (x,), forbidden=["torch.softmax"], baseline=baseline)
    assert problems == []


def test_threads_left_running_are_reported():
    def leaves_thread(t):
        threading.Thread(target=time.sleep, args=(0.5,), name="straggler").start()
        return t + 1
    _, problems, _ = guard.traced_call(leaves_thread, (torch.ones(2),), forbidden=[], baseline=baseline)
    assert any("straggler" in p for p in problems)


def test_snapshot_sees_patched_timer_and_torch_function():
    guard.prime()
    snap = guard.Snapshot()
    assert snap.changed() == []
    orig = time.perf_counter_ns
    try:
        time.perf_counter_ns = lambda: 0
        assert "time.perf_counter_ns" in snap.changed()
    finally:
        time.perf_counter_ns = orig
    assert snap.changed() == []


def test_forbidden_op_aliases():
    assert {"mm", "addmm"} <= guard.forbidden_ops(["torch.matmul"])
    assert "_softmax" in guard.forbidden_ops(["torch.nn.functional.softmax"])


def test_tracing_does_not_import_dynamo():
    """Importing torch._dynamo costs a second per claim process; the trace must not need it."""
    import subprocess
    import sys

    code = ("import sys, torch\nfrom claimbench import guard\nguard.prime()\n"
            "out, probs, ops = guard.traced_call(lambda x: x.softmax(-1), (torch.ones(2, 2),), "
            "forbidden=['torch.softmax'], baseline=lambda: None)\n"
            "assert probs and '_softmax' in ops, (probs, ops)\n"
            "print('torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_snapshot_accepts_dynamos_own_rebinding_but_not_a_foreign_shim():
    import torch._dynamo  # noqa: F401  (rebinds torch.manual_seed when first imported)

    snap = guard.Snapshot()
    before = torch.manual_seed
    orig = getattr(before, "__wrapped__", before)  # dynamo has wrapped it by now
    try:
        torch.manual_seed = torch._disable_dynamo(orig)
        snap.items["torch.manual_seed"] = orig
        assert snap.changed() == []
        torch.manual_seed = torch._disable_dynamo(lambda seed: None)
        assert snap.changed() == ["torch.manual_seed"]
    finally:
        torch.manual_seed = before


def test_a_compiled_kernel_is_still_traced():
    compiled = torch.compile(lambda x: x * 2 + 1)
    _, problems, ops = guard.traced_call(compiled, (torch.ones(3),), forbidden=["torch.mul"], baseline=baseline)
    assert "mul" in ops and any("aten::mul" in p for p in problems)
