"""Precision and machine load as part of `verified`: a number is published only when the next
person with the same hardware would get it again.

A lower bound that clears a modest claim is not such a number: a CI of [0.54, 4.02] clears a
claim of 0.5 and says almost nothing about the value. So from measurement protocol 4 on, a
timing verdict also needs

- a narrow CI: its half-width, (high - low) / 2, at most a stated fraction of the value. The
  defaults are 2% on a GPU and 5% on a CPU, the spread the list promises between two runs of the
  same claim on the same hardware. A GPU's cold, flushed, event-timed samples routinely give a
  CI of a fraction of a percent within seconds, so 2% leaves room for run-to-run variance
  (``--repeat``) without letting a clock-boost lottery through. A CPU shares its cores with the
  operating system and its caches with everything else: the shipped CPU claims reached 0.4-2.4%
  half-width on a quiet machine in 10 s, and a claim made of many small parallel calls 6-10%,
  which is exactly the kind of number that moved by a factor of 3 on another machine. A claim may
  tighten the bound (``claimed.max_ci_halfwidth``), and loosen it only with
  ``claimed.precision_reason``, which ``claimbench check`` shows.
- a quiet CPU: when other processes used more than ``BUSY_CPU_FRACTION`` of the machine's CPU
  time during the timed rounds, a CPU claim's timing verdict is ``inconclusive`` ("machine
  busy"), whatever its CI says. 10%: an idle machine's own daemons take a percent or two, and on
  a 2-core machine 10% is a fifth of a core taken from a claim that uses both; past that the
  medians move with the neighbours' work (the issue that asked for this saw one claim's CI swing
  from [3.99, 5.28] to [1.12, 14.9] minutes apart).
- on a GPU, no other process on the GPU during the timed rounds (``other_gpu_processes``); one
  seen at detection time is already a blocker.

Records of protocol 3 and older are decided by the rules they were made under, so ``audit``
recomputes them exactly as before. The runner asks ``precision_reached`` between rounds whether
it may stop: the same statistic on fewer resamples, with a margin, because the verdict's fixed-seed
2000-resample bootstrap, not the stopping rule, decides.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Mapping, Optional

if TYPE_CHECKING:  # numpy stays out of `claimbench check`, which reads the defaults
    from claimbench.stats.resample import Samples

PRECISION_PROTOCOL = 4          # the first measurement protocol decided with these rules
PROCESSES_PROTOCOL = 5          # ... and the first to ask a CPU number for several processes
# A CPU number needs this many processes (`--repeat`), because a single process's CI measures only
# the noise within that process: on a 2-core VM, five one-process runs of a claim gave values 24-43%
# apart while each reported a half-width of 4-19%, and the one run that came in under 5% was not
# reproduced by the other four. The resampled CI over several processes carries their spread.
MIN_PROCESSES = {"cpu": 3}
MAX_CI_HALFWIDTH = {"cuda": 0.02, "cpu": 0.05}  # fraction of the value
BUSY_CPU_FRACTION = 0.10        # other processes' share of all cores' time during the timed rounds
STOP_RESAMPLES = 1000           # the stopping rule's bootstrap, against the verdict's 2000
STOP_MARGIN = 0.9               # stop at 90% of the bound: on 200 random data sets the verdict's
                                # half-width was at most 1.09x this one's in 99% (1.14x at worst)


def applies(protocol_version: Optional[int]) -> bool:
    """Do the precision and load rules decide a record of this protocol?"""
    return protocol_version is not None and protocol_version >= PRECISION_PROTOCOL


def default_halfwidth(device: str) -> float:
    """The device's default bound; the strictest when the device is unknown."""
    return MAX_CI_HALFWIDTH.get(device, min(MAX_CI_HALFWIDTH.values()))


def max_halfwidth(device: str, claimed: Optional[float]) -> float:
    """The bound a claim is held to: its own when it states one, else the device's default."""
    return float(claimed) if claimed is not None else default_halfwidth(device)


def too_few_processes_reason(protocol_version: Optional[int], device: str, processes: int) -> Optional[str]:
    """Why one (or too few) processes cannot back a number on this device, or None."""
    need = MIN_PROCESSES.get(device, 1)
    if protocol_version is None or protocol_version < PROCESSES_PROTOCOL or processes >= need:
        return None
    return (f"{processes} process{'es' if processes != 1 else ''} cannot show a {device.upper()}'s run-to-run "
            f"spread: a {device.upper()} number needs {need} (run with --repeat {need}, the default on a "
            f"{device.upper()})")


def halfwidth_fraction(value: float, low: float, high: float) -> float:
    """(high - low) / 2 as a fraction of |value|; inf when it cannot be computed."""
    if not all(math.isfinite(x) for x in (value, low, high)) or value == 0:
        return math.inf
    return (high - low) / 2 / abs(value)


def busy_reason(device: str, other_cpu_fraction: Optional[float]) -> Optional[str]:
    """Why a CPU measurement says nothing, or None when the machine was quiet enough (or unknown)."""
    if device != "cpu" or other_cpu_fraction is None or other_cpu_fraction <= BUSY_CPU_FRACTION:
        return None
    return (f"machine busy: {other_cpu_fraction:.0%} of the cores were used by other processes during the "
            f"timed rounds (more than {BUSY_CPU_FRACTION:.0%}); rerun on a quieter machine")


def gpu_sharing_reason(device: str, other_gpu_processes: Optional[int]) -> Optional[str]:
    if device != "cuda" or not other_gpu_processes:
        return None
    n = int(other_gpu_processes)
    return f"{n} other process{'es' if n != 1 else ''} used the GPU during the timed rounds"


def too_wide_reason(fraction: float, limit: float, device: str, *, claimed: Optional[float], advice: str = "") -> str:
    """Why the interval is too wide and, from its spreads (stats/settle.py), what would settle it."""
    whose = "the claim's max_ci_halfwidth" if claimed is not None else f"the {device or 'default'} default"
    head = f"CI too wide: half-width {fraction:.1%} of the value, above {limit:.1%} ({whose})"
    return f"{head}; {advice}" if advice else (f"{head}; narrow it with --repeat N (more processes), more time "
                                               "(--max-time-s), or a quieter machine")


def precision_reached(kernel: "Samples", baseline: Optional["Samples"], metric: str, *, device: str,
                      max_ci_halfwidth: Optional[float] = None, flops: Optional[float] = None,
                      nbytes: Optional[float] = None, floor_us: Optional[float] = None,
                      resamples: int = STOP_RESAMPLES, margin: float = STOP_MARGIN) -> tuple[bool, float]:
    """Is the CI narrow enough to stop taking rounds? (reached, half-width as a fraction of the value).

    Pass every kept sample so far, tagged by process and round as in the record. Fewer than
    MIN_ROUNDS (3) rounds: (False, inf). ``margin`` stops a little inside the bound, so the verdict's
    own bootstrap agrees. Pure; its cost grows with rounds x resamples: about 1 ms at 50 rounds,
    7 ms at 200 and 40 ms at 1000 on one core, so call it after every round while rounds are
    few and after every tenth more rounds beyond a few hundred.
    """
    from claimbench.stats.resample import Request, Samples, bootstrap_many

    empty = Samples((), (), ())
    value, low, high = bootstrap_many([Request(metric, kernel, baseline or empty, flops, nbytes, floor_us)],
                                      resamples)[0]
    frac = halfwidth_fraction(value, low, high)
    return frac <= margin * max_halfwidth(device, max_ci_halfwidth), frac


def evidence_fields(protocol_version: int, protocol: Mapping[str, Any], hardware: Mapping[str, Any],
                    *, claimed: Mapping[str, Any]) -> dict[str, Any]:
    """The Evidence fields of these rules, from a record's own fields: where the runner stores
    them (``protocol.device``, ``protocol.machine_load``, ``claimed.max_ci_halfwidth``)."""
    load = protocol.get("machine_load") or {}
    return dict(protocol_version=protocol_version, device=evidence_device(protocol, hardware),
                max_ci_halfwidth=claimed.get("max_ci_halfwidth"),
                other_cpu_fraction=load.get("other_cpu_fraction"),
                other_gpu_processes=load.get("other_gpu_processes"))


def evidence_device(protocol: Mapping[str, Any], hardware: Mapping[str, Any]) -> str:
    """The device these rules hold a record to: where its sides ran (``protocol.device``), else the
    machine's; audit holds it to the claim's device, since a CPU rule skipped is a rule not applied."""
    return str(protocol.get("device") or hardware.get("device") or "")


__all__ = ["BUSY_CPU_FRACTION", "MAX_CI_HALFWIDTH", "PRECISION_PROTOCOL", "applies", "busy_reason",
           "default_halfwidth", "evidence_device", "evidence_fields", "halfwidth_fraction", "max_halfwidth", "precision_reached"]
