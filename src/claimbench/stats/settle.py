"""What would settle an interval that is too wide: its spread within and between processes.

An `inconclusive` "CI too wide" tells a contributor nothing to do unless it says which spread
dominates. The interval comes from a bootstrap that resamples processes, then rounds within them
(stats/resample.py), so its half-width behaves about like 1.96 x sqrt(s_b^2 / P + s_w^2 / (P R))
on the log scale, with s_w the spread of one round's statistic inside a process, s_b the spread
of the processes' own levels, P processes and R rounds each. The two are estimated from the
record's own rounds (one-way analysis of variance, the method of moments); from them, the
processes `--repeat` would need at the same rounds. Where s_b alone keeps the half-width above
the bound, more time per process (more rounds) cannot settle it, and the message says so. The
arithmetic is approximate; it tells what to try, never a verdict.

The model is of means, and the interval is the bootstrap's, of medians of round medians: those
spread wider (about sqrt(pi/2) for normal rounds) and wider still over few processes, so the
model alone promised too little. On this project's 2-core VM, `cpu-gqa-decode-vs-expanded` at
3 processes of 14 rounds had a half-width of 8.4% where the model said 5.2%, and its advice
("about 4 processes") was followed: 5 processes gave 6.6%, 8 gave 6.6%, against the 5% bound.
So the model is scaled by how much wider this run's own interval is than the model says for it
(never scaled down), and the processes asked for are the scaled model's: 9 for that first run.
It stays an estimate from one run. The same claim at 14 processes still gave 7.0% (the scale was
1.2 to 2.1 across those four runs of one evening): on a shared machine the noise moves between
runs, and no model fitted to one run sees that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from claimbench.stats.resample import Samples, round_medians

Z95 = 1.96
MAX_PRACTICAL_PROCESSES = 30  # beyond this, "more processes" is not advice a contributor can take


@dataclass(frozen=True)
class Split:
    """The log-scale spread of one round's statistic within a process, and of processes' levels."""

    processes: int
    rounds_per_process: float
    within: float
    between: Optional[float]  # None with one process: nothing to compare it with


def split(kernel: Samples, baseline: Optional[Samples]) -> Optional[Split]:
    """The spread of the per-round statistic (log baseline/kernel for a speedup, log kernel time
    otherwise), rounds paired by process and round as the bootstrap pairs them."""
    keys, k = round_medians(kernel)
    y = np.log(k)
    if baseline is not None:
        bkeys, b = round_medians(baseline)
        common, ki, bi = np.intersect1d(keys, bkeys, return_indices=True)
        keys, y = common, np.log(b[bi]) - np.log(k[ki])
    if keys.size < 3 or not np.isfinite(y).all():
        return None
    procs = keys >> 32
    groups = [y[procs == p] for p in np.unique(procs)]
    groups = [g for g in groups if g.size >= 2]
    if not groups:
        return None
    dof = sum(g.size - 1 for g in groups)
    within2 = sum(float(((g - g.mean()) ** 2).sum()) for g in groups) / dof
    sizes = np.array([g.size for g in groups], dtype=float)
    between = None
    if len(groups) >= 2:
        levels = np.array([g.mean() for g in groups])
        between = math.sqrt(max(0.0, float(levels.var(ddof=1)) - within2 * float(np.mean(1 / sizes))))
    return Split(len(groups), float(sizes.mean()), math.sqrt(within2), between)


def halfwidth(s: Split, processes: float, rounds: float) -> float:
    """The approximate half-width (as a fraction) at ``processes`` processes of ``rounds`` rounds."""
    between2 = (s.between or 0.0) ** 2
    return Z95 * math.sqrt(between2 / processes + s.within ** 2 / (processes * rounds))


def calibration(s: Split, measured: Optional[float]) -> float:
    """How much wider this run's interval is than the model says for its own processes and rounds
    (1 when it is not wider, or unknown)."""
    model = halfwidth(s, s.processes, s.rounds_per_process)
    if measured is None or not math.isfinite(measured) or model <= 0:
        return 1.0
    return max(1.0, measured / model)


def advice(kernel: Samples, baseline: Optional[Samples], limit: float, *, measured: Optional[float] = None) -> str:
    """One clause: the two spreads and what would bring the half-width under ``limit``, or "".
    ``measured``: this run's half-width (a fraction), which calibrates the model (module docstring)."""
    s = split(kernel, baseline)
    if s is None or limit <= 0:
        return ""
    spreads = f"round-to-round spread {s.within:.1%} within a process"
    if s.between is None:
        return f"{spreads}; one process says nothing of the spread between processes: rerun with --repeat 3 or more"
    spreads += f", {s.between:.1%} between processes ({s.processes} processes of about {s.rounds_per_process:.0f} rounds)"
    scale = calibration(s, measured)
    need = s.processes
    while scale * halfwidth(s, need, s.rounds_per_process) > limit and need <= MAX_PRACTICAL_PROCESSES:
        need += 1
    time_alone = scale * Z95 * (s.between or 0.0) / math.sqrt(s.processes) > limit
    more_time = ("more time alone cannot settle it: the processes differ" if time_alone
                 else "more time per process (--max-time-s) also narrows it")
    if need > MAX_PRACTICAL_PROCESSES:
        return (f"{spreads}; even {MAX_PRACTICAL_PROCESSES} processes would leave it above {limit:.1%}: "
                "no practical amount settles it on this machine; a quieter one may")
    return f"{spreads}; about {need} processes (--repeat {need}) would bring it under {limit:.1%}; {more_time}"
