"""How long a CPU side's threads waited for a core during its timed calls (the scheduler's run-queue
delay, /proc/PID/task/TID/schedstat), compared between the sides.

Why: the sides of a CPU claim are pinned to the same cores and timed one at a time, the other stopped,
so a side should never wait for its core while it is timed. In an adversarial review (2026-12-06) a
helper process the kernel's C module forked at import left the side's process group and tree once the
side was loaded, so nothing froze or counted it, and spun on the shared core while the baseline was
timed: the baseline waited for half its core, and 1.89x and 1.92x were verified for an honest 1.0x
(`ghost_hog`, `ghost_fork`). Since protocol 10 a side cannot leave its session, which closes that way;
this rule closes the family, whatever competes for the core: the wait is the scheduler's own account,
and other load on the machine makes both sides wait alike (the load meter judges that). A CPU run whose
baseline waited for its core for a larger share of its timed calls than the kernel did, past the
allowance, cannot verify; a wait that cannot be read is a blocker too.

The kernel's share is its calling thread's alone, and the allowance adds it once: an adversarial review
of protocol 11 (`tbf_trickle`) woke 12 helper threads of the kernel's side at each of its calls, which
waited for the core on purpose: about 1% of the kernel's time bought a summed wait share of 16-28%, and
an allowance of twice that plus 5% covered the baseline's 6-20%. The calling thread cannot wait without
the kernel's own call taking that long, so at one times its share the most a kernel can buy is the floor.
"""

from __future__ import annotations

import os
from typing import Mapping, Optional

RATIO = 1.0  # the baseline's share of its timed calls spent waiting, above this many times the kernel's ...
FLOOR = 0.05  # ... plus this share of its calls, is a blocker (a pinned, honest side waits about none)


def waited_ns(pid: int, *, calling_thread_only: bool = False) -> Optional[int]:
    """The run-queue delay of every thread of ``pid`` so far (or of its main thread, which makes a side's
    calls), in nanoseconds; None when it cannot be read (no such process, or a kernel without scheduler
    statistics)."""
    try:
        tids = [str(pid)] if calling_thread_only else os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total, seen = 0, False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                fields = f.read(256).split()
        except OSError:
            continue  # a thread that ended between the listing and the read
        if len(fields) >= 2 and fields[1].isdigit():
            total += int(fields[1])
            seen = True
    return total if seen else None


def blocker(waited_us: Mapping[str, Optional[float]], wall_us: Mapping[str, float]) -> str:
    """Why a CPU run cannot verify for the time its sides waited for a core in their timed calls, or ""."""
    if any(waited_us.get(side) is None for side in ("kernel", "baseline")):
        return ("the time the sides waited for a core in their timed calls could not be read (/proc/PID/schedstat), "
                "so a process competing with the baseline for its core could have slowed it unseen")
    share = {side: (waited_us[side] or 0.0) / max(wall_us.get(side, 0.0), 1e-9) for side in ("kernel", "baseline")}
    k, b = share["kernel"], share["baseline"]
    if b > RATIO * k + FLOOR:
        return (f"the baseline's threads waited for a core for {b:.0%} of its timed calls, the kernel's calling thread "
                f"for {k:.0%}: "
                "something ran on the timed core while the baseline was timed and the kernel side was stopped")
    return ""
