"""A claim's sweep on its page: each point's achieved rate against the machine's measured ceiling,
and the claimed metric with its 95% interval, one series per machine.

A sweep's other points are whole records (their own checks, samples and verdicts) that are never
published: the claim's number stands on its own params. The figure shows where that point sits
among the others, so a reader sees whether the number holds only at one size. The latest record of
each point on each machine is drawn; the claim's own point is ringed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from claimbench.report.siteplots import BASELINE, CEILING, FONT_PT, KERNEL
from claimbench.store.record import same_value
from claimbench.store.summary import Summary

CLAIMED = "#888"


@dataclass(frozen=True)
class PointView:
    """One point as drawn: the axis value, the claim's metric with its interval, the rates."""

    x: Any
    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    kernel_rate: Optional[float]    # TFLOP/s when the claim declares flops, else GB/s; None: no time
    baseline_rate: Optional[float]
    own: bool                       # the claim's own params: the point its verdict stands on


@dataclass(frozen=True)
class SweepSeries:
    machine: str
    points: tuple[PointView, ...]  # in the claim's sweep order
    ceiling: Optional[float]        # the matching measured ceiling, in the rate's unit
    unit: str = "GB/s"              # the rate's unit, the same for every series of a claim (rate_unit)


def sweep_series(claim, recs: Sequence[Summary], record: Callable, *, machine: Callable[[dict], str]) -> list[SweepSeries]:
    """Per machine, the latest measured record of each sweep point (the claim's own point
    included). Empty when the claim sweeps nothing or no point was measured."""
    if claim is None or not claim.workload.sweep:
        return []
    (axis, values), = claim.workload.sweep.items()
    own = claim.workload.params[axis]
    latest: dict[tuple[str, int], Summary] = {}
    for s in sorted(recs, key=lambda s: (s.when, s.path), reverse=True):
        if not s.ok or s.mode != "measured":
            continue
        x = own if s.point is None else s.sweep_value
        if s.point is not None and s.sweep_axis != axis:
            continue
        at = next((i for i, v in enumerate(values) if same_value(v, x)), None)
        if at is not None:
            latest.setdefault((s.hardware, at), s)
    own_at = next((i for i, v in enumerate(values) if same_value(v, own)), None)
    mine = [record(s.path) for (_, i), s in sorted(latest.items()) if i == own_at]
    unit = rate_unit(claim, next((r for r in mine if r is not None and r.ceilings), None))
    series = []
    for hw in sorted({h for h, _ in latest}):
        points, name, ceiling = [], hw, None
        for i, v in enumerate(values):
            hit = latest.get((hw, i))
            r = record(hit.path) if hit is not None else None
            if hit is None or r is None:
                continue
            name = machine(r.hardware)
            k, b = r.kernel.median_us, r.baseline.median_us
            work = (r.flops / 1e6 if r.flops else None) if unit == "TFLOP/s" else (r.bytes / 1e3 if r.bytes else None)
            ceiling = ceiling if ceiling is not None else _ceiling(r.ceilings, unit, str(r.precision.get("dtype", "")))
            points.append(PointView(v, hit.value, hit.ci_low, hit.ci_high, work / k if work and k else None,
                                    work / b if work and b else None, v == own))
        if points:
            series.append(SweepSeries(name, tuple(points), ceiling, unit))
    return series


def rate_unit(claim, own: Any = None) -> str:
    """What a point's rate is: the resource that bounds the claim's own point, from ``own`` (its
    record: flops, bytes and the machine's measured ceilings). A softmax counts flops too, but its
    TFLOP/s would lie on the floor under a compute ceiling a hundred times higher; its GB/s against
    the copy bandwidth says how close it came. Without both counts and ceilings: TFLOP/s when the
    claim counts flops, else GB/s."""
    if not claim.workload.flops:
        return "GB/s"
    if own is not None and own.flops and own.bytes:
        tflops = _ceiling(own.ceilings, "TFLOP/s", str(own.precision.get("dtype", "")))
        gbps = _ceiling(own.ceilings, "GB/s", "")
        if tflops and gbps:
            return "TFLOP/s" if own.flops / (tflops * 1e12) >= own.bytes / (gbps * 1e9) else "GB/s"
    return "TFLOP/s"


def _ceiling(ceilings: dict, unit: str, dtype: str) -> Optional[float]:
    """The measured ceiling a rate is held to: copy bandwidth for GB/s, the dtype's matrix rate for TFLOP/s."""
    if unit == "GB/s":
        bw = ceilings.get("bandwidth_gbps")
        return float(bw) if isinstance(bw, (int, float)) else None
    mm = ceilings.get("matrix_tflops")
    rate = mm.get(dtype) if isinstance(mm, dict) else mm
    return float(rate) if isinstance(rate, (int, float)) else None


def save_sweep(claim, series: list[SweepSeries], path: Path) -> Optional[str]:
    """Draw the sweep into ``path``; its file name, or None when there is nothing to draw."""
    if not series:
        return None
    from claimbench.report import siteplots

    (axis,) = claim.workload.sweep
    siteplots.save(figure(axis, claim.claimed.metric, claim.claimed.value, unit=series[0].unit, series=series), path)
    return path.name


def figure(axis: str, metric: str, claimed: float, *, unit: str, series: Sequence[SweepSeries]):
    """Left: achieved rate of kernel (circles) and baseline (triangles) per point, each machine's
    ceiling dashed; right: the claim's metric with its 95% interval, the claimed value dashed. The
    claim's own point is ringed in both."""
    import matplotlib.pyplot as plt

    fig, (rate_ax, metric_ax) = plt.subplots(1, 2, figsize=(8.5, 3.2))
    numeric = all(isinstance(p.x, (int, float)) and not isinstance(p.x, bool) and p.x > 0
                  for s in series for p in s.points)
    labels = list(dict.fromkeys(str(p.x) for s in series for p in s.points))

    def xs(points) -> list:
        return [p.x if numeric else labels.index(str(p.x)) for p in points]

    for s in series:
        pts = s.points
        line = rate_ax.plot(xs(pts), [p.kernel_rate if p.kernel_rate is not None else math.nan for p in pts], "o-",
                            ms=4, lw=1, color=KERNEL, label=f"kernel, {s.machine}")
        if any(p.baseline_rate for p in pts):
            rate_ax.plot(xs(pts), [p.baseline_rate or math.nan for p in pts], "^--", ms=4, lw=1, color=BASELINE,
                         label=f"baseline, {s.machine}")
        if s.ceiling:
            rate_ax.axhline(s.ceiling, ls=":", lw=1, color=CEILING, label=f"measured ceiling {s.ceiling:.4g} {unit}")
        err = [[max(0.0, p.value - p.ci_low) if p.value is not None and p.ci_low is not None else 0.0 for p in pts],
               [max(0.0, p.ci_high - p.value) if p.value is not None and p.ci_high is not None else 0.0 for p in pts]]
        metric_ax.errorbar(xs(pts), [p.value if p.value is not None else math.nan for p in pts], yerr=err, marker="o",
                           ms=4, capsize=2, lw=1, label=s.machine, color=line[0].get_color() if len(series) > 1 else None)
        for ax, ys in ((rate_ax, [p.kernel_rate for p in pts]), (metric_ax, [p.value for p in pts])):
            mine = [(x, y) for x, y, p in zip(xs(pts), ys, pts) if p.own and y is not None]
            if mine:
                ax.plot(*zip(*mine), "o", ms=10, mfc="none", mec="#1a73e8", mew=1.2)
    metric_ax.plot([], [], "o", ms=10, mfc="none", mec="#1a73e8", label="the claim's own point")
    metric_ax.axhline(claimed, ls="--", lw=1, color=CLAIMED, label=f"claimed {claimed:g}")
    for ax, ylabel in ((rate_ax, f"achieved {unit}"), (metric_ax, metric)):
        if numeric:  # the sweep's own values as ticks, on a log axis: sizes usually grow by factors
            ax.set_xscale("log")
            ticks = sorted({p.x for s in series for p in s.points})
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
        else:
            ax.set_xticks(range(len(labels)), labels)
        ax.set_xlabel(axis, fontsize=FONT_PT + 1)
        ax.set_ylabel(ylabel, fontsize=FONT_PT + 1)
        ax.tick_params(labelsize=FONT_PT)
        ax.legend(fontsize=FONT_PT, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)
    fig.tight_layout()
    return fig
