"""The interrupt count around timed calls (`orchestrator/interrupts.py`): what is counted, on which
cores, and when a baseline's count keeps a CPU run from `verified`."""

from __future__ import annotations

from claimbench.orchestrator import interrupts

TABLE = """\
           CPU0       CPU1       CPU2
  1:         10          0          5   IO-APIC   1-edge      i8042
 24:        100        200        300   PCI-MSI 512000-edge      virtio0
NMI:          7          8          9   Non-maskable interrupts
LOC:       1000       2000       4000   Local timer interrupts
RES:        555        666        777   Rescheduling interrupts
TLB:         11         22         33   TLB shootdowns
ERR:          3
MIS:          0
"""


def _write(tmp_path, text: str):
    p = tmp_path / "interrupts"
    p.write_text(text)
    return str(p)


def test_device_lines_and_the_local_timer_are_counted_on_the_timed_cores_only(tmp_path):
    path = _write(tmp_path, TABLE)
    assert interrupts.count(None, path) == (10 + 0 + 5) + (100 + 200 + 300) + (1000 + 2000 + 4000)
    assert interrupts.count(frozenset({1}), path) == 0 + 200 + 2000  # no NMI, no IPI, no ERR/MIS total
    assert interrupts.count(frozenset({0, 2}), path) == 10 + 5 + 100 + 300 + 1000 + 4000


def test_what_cannot_be_counted_is_none(tmp_path):
    assert interrupts.count(None, str(tmp_path / "missing")) is None
    assert interrupts.count(None, _write(tmp_path, "")) is None
    assert interrupts.count(None, _write(tmp_path, "garbage here\n 1: 2 3\n")) is None
    assert interrupts.count(frozenset({7}), _write(tmp_path, TABLE)) is None  # no such CPU online


def test_a_baseline_hit_far_more_often_than_the_kernel_cannot_verify():
    wall = {"kernel": 2e6, "baseline": 2e6}  # two seconds each
    assert interrupts.blocker({"kernel": 500, "baseline": 540}, wall) == ""  # an idle core's timer, both sides
    assert interrupts.blocker({"kernel": 60_000, "baseline": 500}, wall) == ""  # the kernel's own: no help to it
    why = interrupts.blocker({"kernel": 500, "baseline": 60_000}, wall)
    assert "30,000 interrupts a second" in why and "the kernel's 250" in why
    assert "could not be counted" in interrupts.blocker({"kernel": None, "baseline": 10}, wall)
