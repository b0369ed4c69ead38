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
