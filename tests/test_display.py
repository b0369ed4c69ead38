"""display: each metric reads the way a reader expects it."""

from __future__ import annotations

import pytest

from claimbench.display import dtype_short, format_value, safe_text


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
    assert format_value(metric, value, term, "X") == want


def test_short_dtypes_and_safe_text():
    assert [dtype_short(d) for d in ("bfloat16", "float8_e4m3fn", "int8")] == ["bf16", "fp8 e4m3", "int8"]
    assert safe_text("torch.softmax <!-- x -->\n eager") == "torch.softmax x eager"
