"""site: the pages exist, every local link and image resolves, the SVGs parse, Chromium renders it."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from urllib.parse import urlparse

import pytest

import recordkit as rk
from claimbench.publish import publish
from claimbench.site import build_site


class Refs(HTMLParser):
    def __init__(self):
        super().__init__()
        self.refs: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root, recs = rk.standard_tree(tmp_path_factory.mktemp("site") / "proj")
    publish(root, root / "LIST.md", root / "results")
    index = build_site(root, root / "results" / "site")
    return root, recs, index


def test_pages_exist(site):
    root, _, index = site
    out = index.parent
    assert index.name == "index.html" and (out / "rooflines.html").is_file()
    claims = {p.stem for p in (out / "claims").glob("*.html")}
    assert claims == {p.stem for p in (root / "claims").glob("*.yaml")}
    assert {p.name for p in out.glob("roofline-*.svg")} == {
        "roofline-nvidia-h200.svg", "roofline-nvidia-h100.svg", "roofline-nvidia-b200.svg", "roofline-nvidia-gh200.svg"}


def test_every_local_link_resolves(site):
    _, _, index = site
    pages = list(index.parent.rglob("*.html"))
    checked = 0
    for page in pages:
        parser = Refs()
        parser.feed(page.read_text(encoding="utf-8"))
        for ref in parser.refs:
            if urlparse(ref).scheme in ("http", "https"):
                continue
            target = (page.parent / ref.split("#")[0]).resolve()
            assert target.exists(), f"{page.name}: broken link {ref}"
            checked += 1
    assert checked > 30


def test_svgs_parse(site):
    _, _, index = site
    svgs = list(index.parent.rglob("*.svg"))
    assert len(svgs) >= 10
    for svg in svgs:
        assert ET.parse(svg).getroot().tag.endswith("svg")


def test_index_holds_the_numbers_and_claim_page_the_evidence(site):
    _, recs, index = site
    text = index.read_text(encoding="utf-8")
    assert "1.62× [1.61, 1.63] vs torch.softmax, eager · fixture kernel softmax-online · H200 · bf16" in text and 'href="claims/softmax-online.html"' in text
    assert "<script" not in text
    page = (index.parent / "claims" / "softmax-online.html").read_text(encoding="utf-8")
    for needle in ("https://example.org/softmax-online", "softmax-online-history.svg", "softmax-online-samples.svg",
                   "Correctness errors", "rel_l2 0.002", recs["softmax_h100"].name, "stale hash"):
        assert needle in page


@pytest.mark.skipif(not shutil.which("chromium"), reason="needs Debian's chromium for a headless render")
def test_renders_in_headless_chromium(site, tmp_path):
    _, _, index = site
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run"]
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run(["chromium", *flags, f"--user-data-dir={profile}", "--dump-dom", index.as_uri()],
                             capture_output=True, text=True, timeout=120)
    assert "1.62× [1.61, 1.63] vs torch.softmax, eager" in dom.stdout and "Blackwell Tuning Guide" in dom.stdout
    shot = tmp_path / "claim.png"
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(["chromium", *flags, f"--user-data-dir={profile}", f"--screenshot={shot}",
                        "--window-size=1200,1600", (index.parent / "claims" / "softmax-online.html").as_uri()],
                       capture_output=True, timeout=120)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
