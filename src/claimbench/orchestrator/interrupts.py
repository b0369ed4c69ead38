"""Interrupts on the cores a CPU claim's sides are timed on, counted around every timed call.

Why: a side stopped between its calls cannot run, but what it armed before it stopped still fires.
In an adversarial review (2026-12-06) a kernel opened 16,000 timerfds at import (through a C module
that torch's own extension loader built, past the static rules) and armed them, 30 us apart, in the
last untimed exchange of its run of a round. They fired on the core both sides are pinned to while
the baseline was timed. The kernel here has no IRQ time accounting, so each interrupt's handling was
charged to the task it interrupted, the baseline: an honest matmul at 1.0x was verified at 1.76x
[1.74, 1.81]. Neither the machine-busy meter (the time was the baseline's) nor the census (no process,
thread, affinity, handler or cgroup changed) saw it.

Timers are one source; asynchronous I/O and devices fire the same way. So what is counted is every
device line of /proc/interrupts and the local timer (`LOC` on x86; an ARM timer is a device line),
on the timed cores. Inter-processor interrupts are left out: a side's own threads cause those
(rescheduling, TLB shootdowns after an munmap), and a baseline that frees big temporaries would
otherwise be blamed for its own work. A CPU run whose baseline's calls took far more of the counted
interrupts a second than the kernel's cannot verify (`blocker`): whatever fired them, the baseline
was slowed by something the kernel's calls did not meet. A GPU run is not held to it: a GPU's own
completion interrupts follow the work each side launches.
"""

from __future__ import annotations

from typing import Mapping, Optional

PATH = "/proc/interrupts"
RATIO = 2.0  # a baseline's rate above this many times the kernel's ...
FLOOR_PER_S = 1000.0  # ... plus this many a second is a blocker (an idle core takes its timer's HZ, 100 to 1,000)


def count(cpus: Optional[frozenset[int]], path: str = PATH) -> Optional[int]:
    """The counted interrupts so far on ``cpus`` (None: every CPU), or None when /proc/interrupts cannot
    be read or names none of them."""
    try:
        with open(path, "rb") as f:
            lines = f.read(1 << 22).decode("ascii", "replace").splitlines()
    except OSError:
        return None
    if not lines:
        return None
    names = lines[0].split()  # CPU0 CPU1 ...: the online CPUs, in column order
    if not names or not all(n.startswith("CPU") and n[3:].isdigit() for n in names):
        return None
    cols = [i for i, n in enumerate(names) if cpus is None or int(n[3:]) in cpus]
    if not cols:
        return None
    total = 0
    for line in lines[1:]:
        parts = line.split()
        if len(parts) <= len(names) or not _counted(parts[0]):
            continue
        vals = parts[1:1 + len(names)]
        if all(v.isdigit() for v in vals):
            total += sum(int(vals[i]) for i in cols)
    return total


def _counted(label: str) -> bool:
    """A device line (`24:`) or the local timer (`LOC:`); not an inter-processor interrupt's."""
    return label == "LOC:" or (label.endswith(":") and label[:-1].isdigit())


def blocker(counts: Mapping[str, Optional[int]], wall_us: Mapping[str, float]) -> str:
    """Why a CPU run cannot verify for the interrupts its sides' timed calls took, or "".

    ``counts``: the counted interrupts during each side's timed calls (None: not counted);
    ``wall_us``: the time they were counted over."""
    if any(counts.get(side) is None for side in ("kernel", "baseline")):
        return ("the interrupts on the timed cores could not be counted (/proc/interrupts), so a side that armed "
                "timers or I/O before it was stopped could have slowed its rival unseen")
    rate = {side: (counts[side] or 0) / max(wall_us.get(side, 0.0) / 1e6, 1e-9) for side in ("kernel", "baseline")}
    k, b = rate["kernel"], rate["baseline"]
    if b > RATIO * k + FLOOR_PER_S:
        return (f"the baseline's timed calls took {b:,.0f} interrupts a second on the timed cores, the kernel's "
                f"{k:,.0f}: something fired into the baseline's calls that the kernel's did not meet (timers or I/O "
                "armed by a side before it was stopped do this); rerun on a quiet machine")
    return ""
