"""The site's figures, as deterministic SVG: history, raw samples, roofline, achieved bandwidth.

Every function returns the figure, so a test can measure where its text landed; `save` writes
it. Labels never overlap: the roofline's claim names sit in a column beside the axes, spaced at
least one line apart, each with a leader line to its point, and legends stand outside the axes.
A figure is drawn only when there is something to put on it.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

KERNEL, BASELINE, CEILING = "#137333", "#a50e0e", "#444"
FONT_PT = 7


class Point(NamedTuple):
    """A claim on the roofline: arithmetic intensity, kernel and baseline TFLOP/s."""

    claim: str
    intensity: float
    kernel_tflops: float
    baseline_tflops: Optional[float]


class Bar(NamedTuple):
    """A claim's achieved bandwidth: declared bytes over median time, GB/s."""

    claim: str
    kernel_gbps: float
    baseline_gbps: Optional[float]


def number(x: float) -> str:
    """Three significant figures, never in e-notation: 7200, 29.6, 0.190."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"{x:.{max(0, 2 - int(math.floor(math.log10(abs(x)))))}f}"


def setup() -> None:
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "claimbench"  # stable ids: the same records give the same SVG
    matplotlib.rcParams["font.size"] = FONT_PT + 1


def as_text(fig) -> None:
    """Every title, label, annotation and legend entry of ``fig`` drawn as the text it is: they hold
    names from claims and records, and `$...$` in one was parsed as mathtext (an unknown macro in a
    GPU name stopped the site with a traceback; an adversarial review, 2026-12-06). Tick labels that a
    number formatter writes keep mathtext (the log axes write their powers of ten in it); tick labels
    given as strings (claim names, sweep values) are text like the rest."""
    from matplotlib.text import Text
    from matplotlib.ticker import LogFormatter, ScalarFormatter

    formatted = {id(label) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                 for ticks, fmt in ((axis.get_major_ticks(), axis.get_major_formatter()),
                                    (axis.get_minor_ticks(), axis.get_minor_formatter()))
                 if isinstance(fmt, (LogFormatter, ScalarFormatter)) for tick in ticks for label in (tick.label1, tick.label2)}
    for t in fig.findobj(Text):
        if id(t) not in formatted:
            t.set_parse_math(False)


def save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    as_text(fig)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)


def history(series: dict[str, list[tuple[datetime, float, float, float, bool]]], claimed: Optional[float],
            metric: str, *, marks: Sequence[tuple[datetime, str, bool]] = ()):
    """Value over time per machine with its 95% CI; filled markers are verified runs. ``marks``:
    (when, label, better) of each commit where the number stepped (report/steps.py), drawn as a
    dotted line with its label, green when better, red when worse."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.xaxis_date()  # the x values are matplotlib's date numbers: its stubs take numbers, not datetimes
    for name, pts in sorted(series.items()):
        x = [float(mdates.date2num(p[0])) for p in pts]
        y = [p[1] for p in pts]
        err = [[max(0.0, p[1] - p[2]) for p in pts], [max(0.0, p[3] - p[1]) for p in pts]]
        line = ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=2, lw=1, label=name, mfc="white")
        ver = [(float(mdates.date2num(p[0])), p[1]) for p in pts if p[4]]
        if ver:
            ax.plot(*zip(*ver), "o", ms=5, color=line[0].get_color())
    if claimed is not None:
        ax.axhline(claimed, ls="--", color="#888", lw=1, label=f"claimed {claimed:g}")
    for when, label, better in marks:
        at = float(mdates.date2num(when))
        ax.axvline(at, ls=":", lw=1, color=KERNEL if better else BASELINE)
        ax.annotate(label, xy=(at, 1.0), xycoords=("data", "axes fraction"), xytext=(2, -2),
                    textcoords="offset points", fontsize=FONT_PT - 1, rotation=90, va="top",
                    color=KERNEL if better else BASELINE)
    _pad_dates(ax, [float(mdates.date2num(p[0])) for pts in series.values() for p in pts])
    ax.set_ylabel(metric)
    ax.legend(fontsize=FONT_PT, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    fig.autofmt_xdate()
    return fig


def _pad_dates(ax, xs: Sequence[float]) -> None:
    """A day either side of the runs: one run alone spanned 2025-2029 (issue 26)."""
    if xs:
        ax.set_xlim(min(xs) - 1.0, max(xs) + 1.0)


def samples(panels: Sequence[tuple[str, Sequence[float], Optional[float], Sequence[float], Optional[float]]]):
    """Raw samples per machine: (title, kernel samples, kernel median, baseline samples, median)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(panels), 2, figsize=(8, 2.3 * len(panels)), squeeze=False)
    for row, (title, ks, km, bs, bm) in zip(axes, panels):
        for ax, side, xs, med, color in ((row[0], "kernel", ks, km, KERNEL), (row[1], "baseline", bs, bm, BASELINE)):
            if xs:
                ax.hist(xs, bins=20, color=color, alpha=0.75)
                if med is not None:
                    ax.axvline(med, color="#222", lw=1)
            else:
                ax.set_axis_off()
                ax.text(0.5, 0.5, f"{side}: no samples", ha="center", va="center", transform=ax.transAxes)
            ax.set_title(f"{side}, {title} (n={len(xs)})", fontsize=FONT_PT + 1)
            ax.set_xlabel("time per call (µs)", fontsize=FONT_PT + 1)
            ax.tick_params(labelsize=FONT_PT)
    fig.tight_layout()
    return fig


def roofline(title: str, bandwidth_gbps: Optional[float], rates_tflops: dict[str, float], *, points: Sequence[Point]):
    """Measured ceilings and each claim's kernel (circle) and baseline (triangle); claim names in
    a column to the right, spaced so that no two overlap."""
    import matplotlib.pyplot as plt
    import numpy as np

    height = max(3.6, (len(points) * FONT_PT * 1.5 / 72 + 1.3) / 0.92)
    fig, ax = plt.subplots(figsize=(8.5, height))
    fig.subplots_adjust(left=0.1, right=0.62, top=0.92, bottom=1.1 / height)
    xs = [p.intensity for p in points]
    lo, hi = min(xs + [1.0]) / 10, max(xs + [100.0]) * 10
    ai = np.logspace(np.log10(lo), np.log10(hi), 200)
    for name, rate in sorted(rates_tflops.items()):
        if bandwidth_gbps:
            ax.plot(ai, np.minimum(bandwidth_gbps * ai / 1e3, rate), lw=1.5,
                    label=f"roof, {name}: {number(rate)} TFLOP/s and {number(bandwidth_gbps)} GB/s")
    if bandwidth_gbps and not rates_tflops:
        ax.plot(ai, bandwidth_gbps * ai / 1e3, lw=1.5, color=CEILING, label=f"copy bandwidth {number(bandwidth_gbps)} GB/s")
    for p in points:
        if p.baseline_tflops:
            ax.plot([p.intensity] * 2, [p.kernel_tflops, p.baseline_tflops], color="#bbb", lw=0.8)
            ax.plot([p.intensity], [p.baseline_tflops], "^", color=BASELINE, ms=5)
        ax.plot([p.intensity], [p.kernel_tflops], "o", color=KERNEL, ms=5)
    ax.plot([], [], "o", color=KERNEL, label="kernel (median)")
    if any(p.baseline_tflops for p in points):
        ax.plot([], [], "^", color=BASELINE, label="baseline (median)")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)", ylabel="TFLOP/s", title=title)
    ax.set_xlim(lo, hi)
    _label_column(fig, ax, points)  # draws the figure, so the axis label has its place
    below = ax.transAxes.inverted().transform(ax.xaxis.label.get_window_extent().p0)[1]
    ax.legend(fontsize=FONT_PT, loc="upper left", bbox_to_anchor=(0.0, below - 0.02), ncol=2, frameon=False)
    return fig


def _label_column(fig, ax, points: Sequence[Point]) -> None:
    """Names at the right of the axes, in the order of their points' heights, one line apart."""
    if not points:
        return
    fig.canvas.draw()
    to_axes = ax.transAxes.inverted()
    ys = [to_axes.transform(ax.transData.transform((p.intensity, p.kernel_tflops)))[1] for p in points]
    order = sorted(range(len(points)), key=lambda i: ys[i])
    gap = FONT_PT * 1.45 / (ax.get_position().height * fig.get_figheight() * 72)
    pos: list[float] = []
    for i in order:  # upwards: each at its point's height, or one gap above the label below
        pos.append(max(ys[i], pos[-1] + gap) if pos else max(ys[i], gap / 2))
    pos[-1] = min(pos[-1], 1.0 - gap / 2)
    for k in range(len(pos) - 2, -1, -1):  # downwards: none above the axes, the gaps kept
        pos[k] = min(pos[k], pos[k + 1] - gap)
    for k, i in enumerate(order):
        p = points[i]
        ax.annotate(p.claim, xy=(p.intensity, p.kernel_tflops), xycoords="data",
                    xytext=(1.03, pos[k]), textcoords="axes fraction", fontsize=FONT_PT, va="center",
                    annotation_clip=False, arrowprops=dict(arrowstyle="-", color="#999", lw=0.6, shrinkA=0, shrinkB=3))


def bandwidth(title: str, bandwidth_gbps: Optional[float], bars: Sequence[Bar]):
    """Achieved GB/s of kernel and baseline per claim, fastest first, the measured copy bandwidth
    as a dashed line; the legend stands above the axes."""
    import matplotlib.pyplot as plt

    bars = sorted(bars, key=lambda b: -b.kernel_gbps)
    height = max(2.4, 0.36 * len(bars) + 1.3)
    fig, ax = plt.subplots(figsize=(8, height))
    y = list(range(len(bars)))[::-1]
    ax.barh([i + 0.2 for i in y], [b.kernel_gbps for b in bars], height=0.38, color=KERNEL, label="kernel")
    if any(b.baseline_gbps for b in bars):
        ax.barh([i - 0.2 for i in y], [b.baseline_gbps or 0.0 for b in bars], height=0.38, color=BASELINE, label="baseline")
    for i, b in zip(y, bars):  # the value at the end of each bar, inside its own row
        ax.text(b.kernel_gbps, i + 0.2, f" {number(b.kernel_gbps)}", va="center", fontsize=FONT_PT - 1)
        if b.baseline_gbps:
            ax.text(b.baseline_gbps, i - 0.2, f" {number(b.baseline_gbps)}", va="center", fontsize=FONT_PT - 1)
    ax.set_yticks(y, [b.claim for b in bars], fontsize=FONT_PT)
    ax.set_ylim(-0.7, len(bars) - 0.3)
    if bandwidth_gbps:
        ax.axvline(bandwidth_gbps, color=CEILING, ls="--", lw=1, label=f"measured copy bandwidth {number(bandwidth_gbps)} GB/s")
    ax.set_xlabel("achieved GB/s (declared bytes / median time)")
    ax.set_title(title, fontsize=FONT_PT + 2, loc="left", pad=22)
    ax.legend(fontsize=FONT_PT, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3, frameon=False)
    return fig
