"""A sweep's other points are records held to their claim like any other, and never published.

The records are built as the runner writes them (recordkit), in a committed fixture tree with a
claim that sweeps `n` over 4096 and 8192 around its own 8192; publish and audit are the product's.
"""

from __future__ import annotations

import json

import pytest
import recordkit as rk

from claimbench.report.audit import audit
from claimbench.report.publish import publish
from claimbench.store.record import SweepPoint, load_record

CID = "softmax-online-sweep"


@pytest.fixture
def root(tmp_path):
    root = rk.copy_tree(tmp_path / "proj", committed=False)
    text = (root / "claims" / "softmax-online.yaml").read_text()
    text = text.replace("id: softmax-online\n", f"id: {CID}\n").replace(
        "  params: {n: 8192}\n", "  params: {n: 8192}\n  sweep: {n: [4096, 8192]}\n")
    (root / "claims" / f"{CID}.yaml").write_text(text)
    rk.git(root, "init", "-q")
    rk.commit_all(root, "a swept claim")
    return root


def point(root, n, **kw):
    """A record of the sweep point n, its flops and bytes at that n, as the runner computes them."""
    bw_gbps = rk.HARDWARE["nvidia-h200"][1]  # the floor at that n: 8 n^2 bytes over the fixture's bandwidth
    fields = dict(sweep_point=SweepPoint(axis="n", value=n), flops=5.0 * n * n, bytes=8.0 * n * n,
                  floor_us=8.0 * n * n / bw_gbps / 1e3)
    return rk.build(root, CID, **{**fields, **kw})


def problems_of(root, path):
    rel = str(path.relative_to(root / "results"))
    return [str(p) for p in audit(root, root / "LIST.md", root / "results", cache=False) if rel in str(p)]


def test_the_claims_own_point_is_published_and_its_other_point_never(root):
    own = rk.write(root, rk.build(root, CID, kernel_us=150, baseline_us=243, seed=1, created="2026-11-01T09:00:00.000000Z"))
    far = rk.write(root, point(root, 4096, kernel_us=40, baseline_us=200, seed=2, created="2026-11-02T09:00:00.000000Z"))
    assert load_record(far).verdict == "verified" and load_record(own).verdict == "verified"
    plan = publish(root, root / "LIST.md", root / "results")
    mine = [n for n in plan.numbers if n.claim_id == CID]
    assert [n.record for n in mine] == [str(own.relative_to(root / "results"))]
    assert f"/{far.name}" not in (root / "LIST.md").read_text()
    assert audit(root, root / "LIST.md", root / "results", cache=False) == []


def test_a_verified_sweep_point_alone_puts_no_number_on_the_list(root):
    rk.write(root, point(root, 4096, kernel_us=40, baseline_us=200, seed=3))
    plan = publish(root, root / "LIST.md", root / "results")
    assert not [n for n in plan.numbers if n.claim_id == CID]
    assert audit(root, root / "LIST.md", root / "results", cache=False) == []


@pytest.mark.parametrize("value, key", [
    (8192, "sweep_point"),     # the claim's own params: that record would be the claim's
    (16384, "sweep_point"),    # not one of the claim's sweep values
    (4096.0, "sweep_point"),   # another type: not the point the claim names
])
def test_audit_refuses_a_point_the_claim_does_not_sweep(root, value, key):
    path = rk.write(root, point(root, 4096, kernel_us=40, baseline_us=200, seed=4))
    d = json.loads(path.read_text())
    d["sweep_point"]["value"] = value
    path.write_text(json.dumps(d))
    found = problems_of(root, path)
    assert any(key in p for p in found), found


def test_audit_holds_a_points_flops_and_bytes_to_that_point(root):
    """A point record that copies the claim's own counts (not its point's) is refused, by field."""
    path = rk.write(root, point(root, 4096, kernel_us=40, baseline_us=200, seed=5, flops=5.0 * 8192 ** 2))
    found = problems_of(root, path)
    assert any("flops" in p and "the record says" in p for p in found), found


def test_a_point_on_a_claim_without_a_sweep_is_refused(root):
    rec = rk.build(root, "softmax-online", kernel_us=40, baseline_us=200, seed=6,
                   sweep_point=SweepPoint(axis="n", value=4096), flops=5.0 * 4096 ** 2, bytes=8.0 * 4096 ** 2)
    path = rk.write(root, rec)
    found = problems_of(root, path)
    assert any("sweep_point" in p for p in found), found


def test_the_claim_page_draws_the_sweep_and_keeps_points_out_of_its_history(root, tmp_path):
    from xml.etree import ElementTree

    from claimbench.report.site import build_site

    rk.write(root, rk.build(root, CID, kernel_us=150, baseline_us=243, seed=1, created="2026-11-01T09:00:00.000000Z"))
    rk.write(root, point(root, 4096, kernel_us=40, baseline_us=200, seed=2, created="2026-11-02T09:00:00.000000Z"))
    build_site(root, tmp_path / "site")
    page = (tmp_path / "site" / "claims" / f"{CID}.html").read_text()
    svg = tmp_path / "site" / "claims" / f"{CID}-sweep.svg"
    assert "Sweep over n" in page and f'src="{svg.name}"' in page and "n=4096" in page
    ElementTree.parse(svg)  # well-formed
    text = svg.read_text()
    assert "the claim&#39;s own point" in text or "the claim's own point" in text
    # the claim counts flops, but 5 n^2 flops over 8 n^2 bytes is bound by memory on the H200's ceilings:
    # rates in GB/s against the copy bandwidth (in TFLOP/s they lay on the floor under 790)
    bw = rk.HARDWARE["nvidia-h200"][1]
    assert "4096" in text and "8192" in text and "achieved GB/s" in text and f"measured ceiling {bw:.4g} GB/s" in text
    plain = build_site(root, tmp_path / "site2") and (tmp_path / "site2" / "claims" / "softmax-online.html").read_text()
    assert "Sweep over" not in plain


def test_the_rate_drawn_is_the_resource_that_bounds_the_claims_own_point():
    from types import SimpleNamespace

    from claimbench.report.sitesweep import rate_unit

    claim = SimpleNamespace(workload=SimpleNamespace(flops="2 * n * n * n"))
    ceilings = {"bandwidth_gbps": 4000.0, "matrix_tflops": {"bfloat16": 800.0}}

    def rec(flops, nbytes):
        return SimpleNamespace(flops=flops, bytes=nbytes, ceilings=ceilings, precision={"dtype": "bfloat16"})
    assert rate_unit(claim, rec(2 * 4096.0 ** 3, 6 * 4096.0 ** 2)) == "TFLOP/s"  # a matmul: 1365 flop/byte
    assert rate_unit(claim, rec(5 * 8192.0 ** 2, 8 * 8192.0 ** 2)) == "GB/s"     # a softmax: 0.6 flop/byte
    assert rate_unit(claim, None) == "TFLOP/s"  # no ceilings: the count the claim declares
    assert rate_unit(SimpleNamespace(workload=SimpleNamespace(flops=None)), rec(1.0, 1.0)) == "GB/s"
