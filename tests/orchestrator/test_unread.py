"""The unread-input probe and the byte arithmetic (orchestrator/unread.py), on a task side simulated in
numpy: what a reference ignores is unread, what it reads is found even where a small change is
hidden (a row max), and a claim's bytes are held to its needed inputs and outputs."""

from __future__ import annotations

import random

import numpy as np

from claimbench.orchestrator import messages as m
from claimbench.orchestrator import perturb
from claimbench.orchestrator.session import InputSet
from claimbench.orchestrator.unread import overcount, unread_inputs
from claimbench.spec.claim import Claim


class Task:
    """`reference(inputs, edits)` as the task side answers it: the function on an edited copy."""

    def __init__(self, fn):
        self.fn, self.calls = fn, 0

    def reference(self, inputs, edits=()):
        self.calls += 1
        arrays = [np.frombuffer(r.tobytes(), np.float32).reshape(it.shape).copy() for it, r in zip(inputs.items, inputs.raw)]
        for e in edits:
            flat = arrays[e.operand].reshape(-1).view(np.uint8)
            perturb.apply_to_bytes(flat, e, 4)
        return [np.asarray(self.fn(*arrays), dtype=np.float64)]


def _inputs(*arrays):
    items = [m.TensorItem(dtype="float32", shape=list(a.shape), nbytes=a.nbytes, fd=i) for i, a in enumerate(arrays)]
    return InputSet(1, items, [np.frombuffer(a.astype(np.float32).tobytes(), np.uint8) for a in arrays])


def test_an_input_the_reference_ignores_is_unread_and_one_it_reads_is_not():
    rng = np.random.default_rng(0)
    x, pad = rng.standard_normal((7, 9)), rng.standard_normal(50)
    inputs = _inputs(x, pad)
    task = Task(lambda x, pad: 2 * x)
    assert unread_inputs(task, inputs, task.reference(inputs), rng=random.Random(1)) == [1]


def test_a_row_max_reads_its_input_even_where_a_rotation_hides_the_change():
    x = np.tile(np.arange(9, dtype=np.float32), (7, 1))  # every row the same: rotating values may keep each max
    inputs = _inputs(x)
    task = Task(lambda x: x.max(axis=1))
    assert unread_inputs(task, inputs, task.reference(inputs), rng=random.Random(2)) == []


def _claim(bytes_expr: str) -> Claim:
    return Claim.model_validate({
        "id": "c", "title": "t", "entry": "e", "source": {"kind": "paper", "title": "t", "url": "https://example.org/x",
                                                         "locator": "s"},
        "hardware": {"device": "cpu", "model": ["*"]},
        "workload": {"inputs": "kernels/k.py:make_inputs", "params": {"n": 4}, "bytes": bytes_expr},
        "precision": {"dtype": "float32"}, "kernel": {"name": "k", "impl": "kernels/k.py:kernel"},
        "baseline": {"name": "b", "impl": "kernels/k.py:baseline"},
        "correctness": {"method": "exact", "reference": "kernels/k.py:reference"},
        "claimed": {"metric": "gbps", "value": 1.0, "tolerance": 0.1}})


def test_declared_bytes_are_held_to_the_needed_inputs_and_the_outputs():
    x, pad = np.zeros((4, 4)), np.zeros(100)
    inputs, ref = _inputs(x, pad), [np.zeros((4, 4))]
    assert overcount(_claim("4 * n * n * 2"), {"n": 4}, inputs, unread=[1], out_dtypes=["float32"], ref=ref) is None  # x and y: 128 B
    why = overcount(_claim("4 * n * n * 2 + 400"), {"n": 4}, inputs, unread=[1], out_dtypes=["float32"], ref=ref)
    assert why is not None and "counts 528 B" in why and "more than the 128 B" in why
    assert "input 1 (float32 [100]) never changed" in why
    assert overcount(_claim("4 * n * n * 2 + 400"), {"n": 4}, inputs, unread=[], out_dtypes=["float32"], ref=ref) is None  # pad read
