"""siteplots: no two pieces of text overlap, however crowded the roofline or the bar chart."""

from __future__ import annotations

import itertools

import pytest

from claimbench.report import siteplots
from claimbench.report.siteplots import Bar, Point


def _boxes(fig, texts):
    """Each text's own box (an annotation's leader line is not text)."""
    from matplotlib.text import Text

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    return [(t.get_text(), Text.get_window_extent(t, r)) for t in texts if t.get_visible() and t.get_text()]


def _ticklabels(ax):
    """The tick labels drawn: those whose tick lies inside the view."""
    (x0, x1), (y0, y1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    return ([t for t in ax.get_xticklabels() if x0 <= t.get_position()[0] <= x1]
            + [t for t in ax.get_yticklabels() if y0 <= t.get_position()[1] <= y1])


def _overlapping(boxes):
    return [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2) if ba.overlaps(bb)]


@pytest.fixture(autouse=True, scope="module")
def _agg():
    siteplots.setup()


@pytest.mark.parametrize("n", [1, 7, 30])
def test_roofline_labels_never_overlap_each_other_the_legend_or_the_axes_labels(n):
    import matplotlib.pyplot as plt

    # crowded on purpose: many claims at nearly the same intensity and rate
    points = [Point(f"claim-number-{i:02d}-with-a-long-name", 10 + 0.1 * i, 50 + 0.2 * i, 20 + i) for i in range(n)]
    fig = siteplots.roofline("H200", 4400.0, {"bfloat16": 790.0, "float8_e4m3fn": 1580.0}, points=points)
    ax = fig.axes[0]
    labels = [t for t in ax.texts if t.get_text().startswith("claim-number")]
    assert len(labels) == n
    legend = ax.get_legend()
    others = [ax.title, ax.xaxis.label, ax.yaxis.label, *_ticklabels(ax)]
    boxes = _boxes(fig, labels) + [("legend", legend.get_window_extent(fig.canvas.get_renderer()))] + _boxes(fig, others)
    assert _overlapping(boxes) == []
    axes_box = ax.get_window_extent(fig.canvas.get_renderer())
    for name, box in _boxes(fig, labels):  # in the column beside the axes, within their height
        assert box.x0 > axes_box.x1 and axes_box.y0 - 1 <= box.y0 and box.y1 <= axes_box.y1 + 1, name
    plt.close(fig)


def test_roofline_legend_shows_only_what_is_drawn():
    import matplotlib.pyplot as plt

    fig = siteplots.roofline("CPU", 30.0, {}, points=[Point("a", 1.0, 0.01, None)])
    names = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert names == ["copy bandwidth 30.0 GB/s", "kernel (median)"]
    plt.close(fig)


def test_bandwidth_chart_text_never_overlaps():
    import matplotlib.pyplot as plt

    bars = [Bar(f"cpu-claim-{i}", 10.0 + i, 5.0 + i / 2) for i in range(25)]
    fig = siteplots.bandwidth("achieved bandwidth on AMD EPYC (2 cores)", 29.6, bars)
    ax = fig.axes[0]
    r = fig.canvas.get_renderer()
    boxes = _boxes(fig, [ax.title, ax.xaxis.label, *_ticklabels(ax)])
    boxes.append(("legend", ax.get_legend().get_window_extent(r)))
    assert len(boxes) > 25 and _overlapping(boxes) == []
    values = _boxes(fig, ax.texts)
    assert len(values) == 50 and _overlapping(values) == []
    plt.close(fig)


def test_number_is_three_significant_figures_without_exponents():
    assert [siteplots.number(x) for x in (7200.0, 29.61, 0.19, 1580.0, 0.0)] == ["7200", "29.6", "0.190", "1580", "0"]


def test_a_dollar_sign_in_a_label_is_text_not_mathtext(tmp_path):
    """`$\\undefinedmacro$` in a GPU name stopped the whole site with matplotlib's ParseFatalException."""
    fig = siteplots.bandwidth("achieved bandwidth on NVIDIA H200 $\\undefinedmacro$", 4400.0,
                              [Bar("claim $\\x$", 3000.0, 2000.0)])
    siteplots.save(fig, tmp_path / "b.svg")  # raised before
    assert "undefinedmacro" in (tmp_path / "b.svg").read_text() or (tmp_path / "b.svg").stat().st_size > 0


def test_a_slug_cleaned_to_another_machines_never_shares_its_charts():
    """A rejected record saying `nvidia-h200!` drew over the real H200's roofline and bandwidth charts."""
    from claimbench.report.siteview import _file_slug

    assert _file_slug("nvidia-h200") == "nvidia-h200"
    assert _file_slug("nvidia-h200!") != "nvidia-h200" and _file_slug("NVIDIA-H200") != "nvidia-h200"
