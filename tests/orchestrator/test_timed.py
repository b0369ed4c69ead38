"""The orchestrator's view of a CUDA side, without a GPU: events must fit inside its bracket, and
time spent outside the events is held to a bound calibrated with null calls."""

import os

import pytest

from claimbench.orchestrator import messages as m
from claimbench.orchestrator import timed
from claimbench.orchestrator.orchestrate import _bracket_problems
from claimbench.orchestrator.timed import RemoteTimer


class Clock:
    """The orchestrator's clock in these tests: it moves only when a scripted side takes its time, so
    no outcome here depends on how busy the machine is (a real sleep of 1.5 ms took 2.9 ms under the
    test command's own load and tripped the bound)."""

    ns = 0

    def __call__(self) -> int:
        return self.ns


CLOCK = Clock()


@pytest.fixture(autouse=True)
def _scripted_clock(monkeypatch):
    monkeypatch.setattr(timed, "_NOW", CLOCK)


class ScriptedChannel:
    """A side that answers each call after `delay_s`, reporting `event_us` as its CUDA event time."""

    def __init__(self, script, synced=False):
        self.script, self.sent, self.synced = list(script), [], synced

    def send(self, msg, fds=()):
        self.sent.append(msg)

    def recv(self, timeout_s=None):
        delay_s, event_us = self.script.pop(0)
        CLOCK.ns += int(delay_s * 1e9)
        return m.Called(outputs=[], side_us=event_us, event_us=event_us, synced=self.synced), []


class ScriptedSide:
    def __init__(self, script):
        self.pid, self.extra, self.channel = os.getpid(), [], ScriptedChannel(script)
        self.cpu_at_freeze, self.idle_cpu_s = None, 0.0
        self.handled_extra = 0  # as SideProcess: no signal handler seen at a freeze

    def thaw(self):
        pass

    def freeze(self):
        pass

    def wait_stopped(self, timeout_s=2.0):
        return True


class Session:
    def __init__(self, sides):
        self.sides = sides

    def left(self):
        return 60.0

    def release(self, role):
        pass


def _timer(script):
    t = RemoteTimer(Session({"kernel": ScriptedSide(script)}), "cuda", hot=False, min_block_us=100.0,
                    flush_bytes=1 << 20, l2_reset=True)
    t.calls_per_block["kernel"] = 1
    return t


def test_events_longer_than_the_bracket_are_flagged():
    t = _timer([(0.001, 5000.0)] * 3)  # 1 ms brackets, 5 ms events: the side lied
    for _ in range(3):
        t.sample("kernel", None)
    assert t.bracket.violations and "inside a bracket" in t.bracket.violations[0]
    assert _bracket_problems(t, "cuda")


def test_work_outside_the_events_is_bounded_by_the_null_calls():
    honest = _timer([(0.0005, 0.0)] * 31 + [(0.0015, 1000.0)] * 5)  # null gap ~0.5 ms; kernel 1 ms in events
    honest.calibrate("kernel", None)
    for _ in range(5):
        honest.sample("kernel", None)
    assert not _bracket_problems(honest, "cuda"), _bracket_problems(honest, "cuda")
    hidden = _timer([(0.0005, 0.0)] * 31 + [(0.0215, 1000.0)] * 5)  # 20 ms more per sample, outside the events
    hidden.calibrate("kernel", None)
    for _ in range(5):
        hidden.sample("kernel", None)
    problems = _bracket_problems(hidden, "cuda")
    assert any("outside its CUDA events" in p for p in problems), problems


class TwoRanks:
    """The orchestrators' group as seen by one rank: `max` with the other rank's value."""

    rank, world = 0, 2

    def __init__(self, other):
        self.other, self.maxed = other, []

    def max(self, values):
        self.maxed.append(list(values))
        return [max(v, o) for v, o in zip(values, self.other)]

    def barrier(self):
        pass


def test_ranks_with_different_null_spreads_double_their_blocks_to_one_target():
    """The CI failure of 2026-12-02: each rank stopped doubling at its own null spread, one rank made
    more calls than the other, and their sides' collectives waited on each other until the limit."""
    t = RemoteTimer(Session({}), "cpu", hot=True, min_block_us=100.0, flush_bytes=None, l2_reset=None,
                    coord=TwoRanks([900.0]))
    t.bracket.null_iqr_us["kernel"] = 10.0  # this rank alone: 3 x 10 us < 100 us
    assert t.block_target("kernel") == 900.0  # the other rank's, larger, target wins on both
    assert t.coord.maxed == [[100.0]]
    solo = RemoteTimer(Session({}), "cpu", hot=True, min_block_us=100.0, flush_bytes=None, l2_reset=None)
    solo.bracket.null_iqr_us["kernel"] = 50.0
    assert solo.block_target("kernel") == 150.0


def test_a_side_whose_calls_synchronize_is_timed_and_labelled():
    """A call that waits for the GPU inside (its timer marks it) is timed like any other, and the
    record's bracket names the side, since its number includes that wait (issue 23)."""
    t = _timer([(0.001, 500.0)] * 3)
    t.s.sides["kernel"].channel.synced = True
    samples = [t.sample("kernel", None) for _ in range(3)]
    assert [s.us for s in samples] == [500.0] * 3 and not t.bracket.violations
    summary = t.bracket.summary()
    assert summary.synced == ("kernel",) and summary.as_record()["synced"] == ["kernel"]
    quiet = _timer([(0.001, 500.0)])
    quiet.sample("kernel", None)
    assert "synced" not in quiet.bracket.summary().as_record()  # other records keep their keys
