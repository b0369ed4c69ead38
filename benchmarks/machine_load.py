"""How busy the machine was over an interval, from /proc/stat, with our own children taken out.

Used by the benchmarks to say whether a figure was taken on a quiet machine. The share is of all
cores' time: on 2 cores, one other process spinning for the whole interval is 50%.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Load:
    wall_s: float
    busy_fraction: float    # all processes, of all cores' time
    own_fraction: float     # this process's finished children (the runs we started)
    other_fraction: float   # the rest: other processes

    def __str__(self) -> str:
        return (f"machine {self.busy_fraction:.0%} busy over {self.wall_s:.1f} s: ours {self.own_fraction:.0%}, "
                f"others {self.other_fraction:.0%} of {os.cpu_count()} cores")


def _stat() -> tuple[int, int]:
    """(busy, total) jiffies over all cores; iowait counts as idle."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    total = sum(fields[:8])  # guest time is already inside user
    return total - idle, total


def _children_s() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class LoadMeter:
    """``with LoadMeter() as m: ...`` then ``m.load``; children must have exited by the end."""

    def __enter__(self) -> "LoadMeter":
        self._t, self._stat, self._own = time.monotonic(), _stat(), _children_s()
        return self

    def __exit__(self, *exc) -> None:
        busy0, total0 = self._stat
        busy1, total1 = _stat()
        total = max(1, total1 - total0)
        hz = os.sysconf("SC_CLK_TCK")
        own = (_children_s() - self._own) * hz / total
        busy = (busy1 - busy0) / total
        self.load = Load(time.monotonic() - self._t, busy, min(own, busy), max(0.0, busy - own))
