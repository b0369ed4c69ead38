"""trials: a correctness check at the claim's own params must compare something a wrong answer fails.

Run through the real runner (`run_one`) on the fixture task `kernels/cheat/vacuous_task.py`: with no
output elements every comparison passed having compared nothing, and with an all-zero reference an
all-zero kernel passed every bound; both ended "checks passed" (and, timed, near-verified numbers).
"""

from __future__ import annotations

import pytest
from cheat_project import HEAD, write_claim

from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.runner import run_one
from claimbench.stats.status import Status

VACUOUS = HEAD + """\
workload:
  inputs: kernels/cheat/vacuous_task.py:make_inputs
  params: {{rows: 64, cols: 250}}
  check_params: [{{rows: 3, cols: 17}}]
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/vacuous_kernel.py:{file}"}}
baseline: {{name: b, impl: "kernels/cheat/vacuous_task.py:{file}_baseline"}}
correctness: {{method: allclose, reference: "kernels/cheat/vacuous_task.py:{file}_reference", max_rel_l2: 1.0e-5,
  rtol: 1.0e-5, atol: 1.0e-6, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""


@pytest.mark.parametrize(("kind", "why"), [
    ("empty", "nothing was compared: the reference has no output elements at the claim's params"),
    ("zero", "the reference is all zeros at the claim's params, so an all-zero answer passes every check"),
])
@pytest.mark.parametrize("timing", ["off", "measured"])
def test_a_check_that_compares_nothing_is_rejected_never_passed(cheat_root, cheat_servers, kind, why, timing):
    file = {"empty": "empty", "zero": "zeros"}[kind]
    path = write_claim(cheat_root, f"vacuous-{kind}-{timing}", file, template=VACUOUS, value="1.5")
    path.write_text(path.read_text().replace(f"vacuous_task.py:{file}_", f"vacuous_task.py:{kind}_"))
    opts = RunOptions(results=cheat_root / "results", timeout_s=180.0, threads=1, correctness_only=timing == "off",
                      timing=TimingLimits(max_time_s=0.5, warmup_s=0.05))
    out = run_one(path, cheat_root, detect(cheat_root), opts=opts, servers=cheat_servers)
    assert out.status == Status.REJECTED, (out.status, out.reason)
    assert why in out.reason, out.reason


def test_passed_through_finds_each_input_a_prepare_hands_on_unchanged():
    """The operands the timed rounds may write a change into: same dtype, shape and bytes as an
    input, laid out contiguously; anything `prepare` transformed, re-laid or re-typed is not one."""
    import numpy as np

    from claimbench.orchestrator import messages as m
    from claimbench.orchestrator.session import InputSet
    from claimbench.orchestrator.trials import passed_through

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    w = np.ones((4, 4), dtype=np.float32)
    items = [m.TensorItem(dtype="float32", shape=[3, 4], nbytes=48, fd=0),
             m.TensorItem(dtype="float32", shape=[4, 4], nbytes=64, fd=1), m.ScalarItem(value=2)]
    inputs = InputSet(set_id=1, items=items, raw=[x.view(np.uint8).ravel(), w.view(np.uint8).ravel(), None])

    def buf(dtype: str, shape: list[int], strides: list[int]) -> m.Buffer:
        return m.Buffer(dtype=dtype, shape=shape, strides=strides, ptr=4096, span_bytes=48, device="cpu", storage=(4096, 48))

    same = buf("float32", [3, 4], [4, 1])
    raw_x = x.view(np.uint8).ravel().copy()
    # x handed on as it is (second), w transformed (first): only x passes through
    assert passed_through(inputs, [buf("float32", [4, 4], [4, 1]), same], [(w * 2).view(np.uint8).ravel(), raw_x]) == {0: 1}
    # the same bytes in another layout, dtype or shape are not x
    assert passed_through(inputs, [buf("float32", [3, 4], [1, 3])], [raw_x]) == {}
    assert passed_through(inputs, [buf("int32", [3, 4], [4, 1])], [raw_x]) == {}
    assert passed_through(inputs, [buf("float32", [12], [1])], [raw_x]) == {}
    # one changed element and it is no longer x; two copies of x: the first is the one changed
    bumped = raw_x.copy()
    bumped[0] ^= 1
    assert passed_through(inputs, [same], [bumped]) == {}
    assert passed_through(inputs, [same, same], [raw_x, raw_x]) == {0: 0}
