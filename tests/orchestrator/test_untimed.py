"""The refresh null calls compared between the sides (`orchestrator/untimed.py`): a kernel side that
answers them late, in most processes, cannot verify; a side's own small lag and noise can."""

from __future__ import annotations

from claimbench.orchestrator import untimed


def test_figures_are_each_sides_median_spread_and_count():
    got = untimed.refresh_figures({"kernel": [100.0, 120.0, 500.0, 110.0], "baseline": [90.0], "none": []})
    assert got["kernel"]["median_us"] == 115.0 and got["kernel"]["n"] == 4.0 and got["kernel"]["iqr_us"] > 0
    assert got["baseline"] == {"median_us": 90.0, "iqr_us": 0.0, "n": 1.0} and "none" not in got


def test_the_allowance_follows_the_call_the_baseline_spread_and_a_floor():
    quiet = {"median_us": 480.0, "iqr_us": 40.0, "n": 100.0}
    assert untimed.allowance(1_000.0, quiet) == 100.0  # the floor: a short call
    assert untimed.allowance(20_000.0, quiet) == 600.0  # 3% of a 20 ms call
    noisy = {**quiet, "iqr_us": 400.0, "n": 4.0}
    assert untimed.allowance(20_000.0, noisy) == 1200.0  # a noisy baseline: six times its spread over the root of n
    # ... never above a tenth of the kernel's call: a kernel side that disturbs the baseline's null calls widens
    # that spread too (`hook_null_mm`: 0.55 -> 9 ms, and a fifth of a matmul hidden there)
    assert untimed.allowance(1_000.0, noisy) == 100.0
    assert untimed.allowance(5_000.0, {**quiet, "iqr_us": 9_000.0, "n": 36.0}) == 500.0


def test_a_late_kernel_side_in_most_processes_is_a_blocker():
    fig = {"kernel": {"median_us": 13_500.0, "iqr_us": 300.0, "n": 30.0},
           "baseline": {"median_us": 480.0, "iqr_us": 40.0, "n": 30.0}}
    late = untimed.excess(fig, 13_500.0)
    assert late is not None and late[0] == 13_020.0
    assert "13,020 us later" in untimed.blocker([late, late, None])
    honest = untimed.excess({**fig, "kernel": {**fig["baseline"], "median_us": 535.0}}, 9_400.0)
    assert untimed.blocker([honest, honest, honest]) == ""  # cpu-gqa's kernel side: 55 us behind, 282 allowed
    assert untimed.blocker([late, honest, honest]) == ""  # one process of three moves no median
    assert untimed.excess({"kernel": fig["kernel"]}, 13_500.0) is None
