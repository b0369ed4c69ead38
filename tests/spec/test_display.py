"""display: each metric reads the way a reader expects it, with its interval, on a machine a
reader can tell apart from the next one."""

from __future__ import annotations

import pytest

from claimbench.spec.display import dtype_short, format_number, format_value, machine_name


@pytest.mark.parametrize("metric, value, term, want", [
    ("speedup", 1.6244, "", "1.62× vs X"),
    ("tflops", 612.4, "", "612 TFLOP/s"),
    ("gbps", 3901.0, "", "3.90 TB/s"),
    ("gbps", 812.3, "", "812 GB/s"),
    ("sol_fraction", 0.8449, "bytes / bandwidth", "84% of measured copy BW"),
    ("sol_fraction", 0.5, "flops / matrix rate", "50% of measured matmul rate"),
    ("time_us", 12.27, "", "12.3 µs"),
])
def test_format_value(metric, value, term, want):
    assert format_value(metric, value, term, baseline="X") == want


@pytest.mark.parametrize("metric, value, lo, hi, want", [
    ("speedup", 3.2086, 3.1014, 3.3527, "3.21× [3.10, 3.35] vs X"),
    ("tflops", 612.4, 600.1, 620.9, "612 TFLOP/s [600, 621]"),
    ("gbps", 3901.0, 3850.0, 3950.0, "3.90 TB/s [3.85, 3.95]"),
    ("sol_fraction", 0.8449, 0.82, 0.86, "84% [82, 86] of measured copy BW"),
    ("time_us", 12.27, 12.1, 12.5, "12.3 µs [12.1, 12.5]"),
])
def test_format_number_carries_the_interval_in_the_value_unit(metric, value, lo, hi, want):
    assert format_number(metric, value, lo, ci_high=hi, floor_term="bytes / bandwidth", baseline="X") == want


def test_machines_are_told_apart():
    gpu = {"device": "cuda", "gpus": [{"name": "NVIDIA H200"}], "cpu": {"model": "x", "cores": 64}}
    assert machine_name(gpu) == "H200"
    assert machine_name({**gpu, "gpus": [{"name": "NVIDIA H200"}] * 2}) == "2× H200"
    cpu = {"device": "cpu", "gpus": [], "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.0GHz",
                                                "cores": 112, "threads_used": 112}}
    assert machine_name(cpu) == "Xeon Platinum 8480+ (112 cores)"
    assert machine_name(cpu, {"torch_threads": 2}) == "Xeon Platinum 8480+ (2 cores)"
    amd = {"device": "cpu", "cpu": {"model": "AMD EPYC 7B13 64-Core Processor", "cores": 1}}
    assert machine_name(amd) == "EPYC 7B13 (1 core)"


def test_short_dtypes():
    assert [dtype_short(d) for d in ("bfloat16", "float8_e4m3fn", "int8")] == ["bf16", "fp8 e4m3", "int8"]
