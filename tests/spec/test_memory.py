"""The verification memory estimate (spec/memory.py): its terms, its bounds, the sizes the trials
hold it to, and what `show` prints, through the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from claimbench.spec import memory
from claimbench.spec.claim import Claim

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ROWMAX = yaml.safe_load((FIXTURES / "claims" / "valid" / "triton-rowmax.yaml").read_text(encoding="utf-8"))


def claim(**changes) -> Claim:
    d = yaml.safe_load(yaml.safe_dump(ROWMAX))
    for path, value in changes.items():
        *head, last = path.split("__")
        node = d
        for k in head:
            node = node[k]
        node[last] = value
    return Claim.model_validate(d)


def test_each_term_is_the_harness_layout_at_the_claims_dtype():
    """4096 x 4096 float32 in, 4096 out: the arithmetic written out once, term by term."""
    (e,) = memory.estimates(claim())
    ops, out, ref = 4096 * 4096 * 4, 4096, 4096 * 4096 * 8
    assert e.device_bytes == 2 * ops + ref + 8 * out + 2 * ops + 2 * 4 * out
    assert e.host_bytes == 2 * ops + 16 * out + 4 * 4 * out + memory.COMPARE_BYTES_PER_ELEMENT * out
    assert e.largest(on_device=True).key == "operands_bytes"  # 2 x 64 MiB, ties the float64 reference's 128 MiB
    assert memory.over_bound(claim()) == []


def test_ranks_on_one_machine_each_hold_the_host_terms():
    one = memory.estimates(claim())[0].host_bytes
    two = memory.estimates(claim(hardware__count=2))[0].host_bytes
    assert two == 2 * one
    assert memory.estimates(claim(hardware__count=2, hardware__nodes=2))[0].host_bytes == one


def test_a_cpu_claim_counts_everything_on_the_host():
    c = claim(hardware={"device": "cpu", "model": ["*"]})
    (e,) = memory.estimates(c)
    assert e.device_bytes == 0 and e.host_bytes == sum(t.bytes for t in e.terms)
    assert "the device is the host" in e.summary()


def test_over_the_bound_names_the_largest_term_and_the_fix():
    device, host = memory.over_bound(claim(workload__memory={"operands_bytes": "rows * cols * itemsize * 1024",
                                                              "output_elements": "rows", "reference_bytes": "0"}))
    assert device.key == host.key == "operands_bytes" and "shrink `params`" in device.message
    assert "GiB on the device at params, above the 60.00 GiB bound" in device.message
    assert "GiB on the host at params, above the 16.00 GiB bound" in host.message


def test_every_sweep_point_is_estimated():
    c = claim(workload__sweep={"rows": [1024, 4096]})
    points = [e.point for e in memory.estimates(c)]
    assert points == ["params", "sweep point 1024"]


@pytest.mark.parametrize("dtype, held, out, wrong", [
    ("float32", 37 * 100 * 4, 37, None),
    ("bfloat16", 37 * 100 * 2, 37, None),
    ("float32", 37 * 100 * 2, 37, "operands_bytes gives 14800"),
    ("float32", 37 * 100 * 4, 100, "output_elements gives 37"),
])
def test_the_trials_hold_the_declaration_to_the_real_sizes(dtype, held, out, wrong):
    why = memory.declared_mismatch(claim(), {"rows": 37, "cols": 100}, dtype=dtype, operand_bytes=held,
                                   output_elements=out)
    assert (why is None) if wrong is None else (wrong in why and "workload.memory." in why), why


def test_no_declaration_means_no_estimate_and_nothing_to_hold():
    c = claim(workload__memory=None)
    assert memory.estimates(c) == [] and memory.over_bound(c) == []
    assert memory.declared_mismatch(c, {"rows": 1, "cols": 1}, dtype="float32", operand_bytes=1, output_elements=9) is None


def test_show_prints_the_estimate_and_the_bounds():
    out = subprocess.run([sys.executable, "-m", "claimbench", "--root", str(FIXTURES), "show", "triton-rowmax"],
                         capture_output=True, text=True, timeout=60)
    line = next(ln for ln in out.stdout.splitlines() if ln.strip().startswith("memory"))
    assert "device 0.38 GiB (largest: the task side's input set and the reference's copy)" in line and "bounds 60.00 GiB and 16.00 GiB" in line
