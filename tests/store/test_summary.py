"""summary: the fields publish, table, site and audit keep of one record."""

from __future__ import annotations

import pytest

from claimbench.store import summary


@pytest.mark.parametrize("hw, slug, name", [
    ({"slug": "nvidia-h200", "name": "NVIDIA H200"}, "nvidia-h200", "H200"),
    ({"device": "cuda", "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 2}, "2x-nvidia-h100-80gb-hbm3", "2× H100 80GB HBM3"),
    ({"device": "cpu", "cpu": {"model": "Intel(R) Xeon(R) Platinum 8480+"}}, "cpu-intel-r-xeon-r-platinum-8480", "Xeon Platinum 8480+"),
    ({}, "unknown", "unknown"),
])
def test_hardware_labels(hw, slug, name):
    assert summary.hardware_slug(hw) == slug
    assert summary.hardware_name(hw) == name
