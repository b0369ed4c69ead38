"""rechecks: which timed calls are checked. On a GPU a kernel sample's outputs are staged only when
they may be the round's checked one; every round must keep exactly one, each sample equally likely."""

from __future__ import annotations

import collections
import types

from claimbench.orchestrator import messages as m
from claimbench.orchestrator.rechecks import Rechecks


class _Session:
    """What `after_sample` and `finish_round` touch of a claim session, and what they asked of it."""

    def __init__(self):
        self.emitted = 0
        self.operands = {"kernel": types.SimpleNamespace(buffers=[])}

    def exchange(self, role, msg, expect):
        assert role == "kernel" and isinstance(msg, m.Emit)
        self.emitted += 1
        return [m.Outputs(outputs=[])]

    def output_raw(self, role, i, b):
        raise AssertionError("no outputs in this fake")

    def release(self, role):
        pass


def _hooks(device: str) -> tuple[Rechecks, _Session]:
    s = _Session()
    timer = types.SimpleNamespace(unreleased=set(), hooks=None)
    return Rechecks(s, claim=None, params={}, seed=0, timer=timer, calls_per_round=5, device=device), s  # type: ignore[arg-type]


def test_every_cuda_round_keeps_exactly_one_candidate_drawn_uniformly():
    """Before, each sample was kept with probability 1/calls_per_round: a round could keep none, and a
    three-round run checked nothing about 3.5% of the time (an adversarial review, 2026-12-06)."""
    hooks, s = _hooks("cuda")
    called = m.Called(outputs=[], side_us=1.0)
    kept = collections.Counter()
    rounds = 3000
    for _ in range(rounds):
        which, last = None, None
        for k in range(5):
            hooks.after_sample("kernel", 0, called)
            now = hooks.candidates[0] if hooks.candidates else None
            if now is not None and now is not last:  # staged anew: this sample is the candidate now
                which = k
            last = now
        assert len(hooks.candidates) == 1
        kept[which] += 1
        hooks.finish_round()  # no inputs here: it only starts the next round
        assert hooks.candidates == [] and hooks.seen_in_round == 0
    assert sorted(kept) == [0, 1, 2, 3, 4]
    assert all(abs(n / rounds - 0.2) < 0.04 for n in kept.values()), kept  # about 15 standard deviations wide
    assert s.emitted < 2.6 * rounds  # 1 + 1/2 + ... + 1/5 = 2.28 stagings a round on average
