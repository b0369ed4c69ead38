"""site: the folder stands alone (every link and anchor resolves inside it), the list reads as
written, numbers carry their interval and machine, text from claims, records and the list is
escaped, rooflines draw nothing empty, and Chromium renders the pages."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
import recordkit as rk
from hypothesis import given, settings
from hypothesis import strategies as st

from claimbench.report.publish import publish
from claimbench.report.site import build_site


class Page(HTMLParser):
    """Links, ids and the sequence of headings and content of one page."""

    def __init__(self):
        super().__init__()
        self.refs: list[str] = []
        self.ids: set[str] = set()
        self.flow: list[tuple[str, int]] = []  # ("h", level) or ("c", 0)

    def handle_starttag(self, tag, attrs):
        d = dict(attrs)
        self.refs += [v for k, v in attrs if k in ("href", "src") and v]
        if d.get("id"):
            self.ids.add(d["id"])
        if re.fullmatch(r"h[2-6]", tag):
            self.flow.append(("h", int(tag[1])))
        elif tag in ("p", "li", "table", "img", "pre", "blockquote"):
            self.flow.append(("c", 0))


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


MAINTAINERS = "<!-- maintainers -->\n> Edit the markers with care:\n> publish writes them.\n<!-- /maintainers -->\n"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """One built site for the module (a build draws every figure: about 4 s here); its list holds a
    maintainers' region, as the shipped LIST.md does."""
    root, recs = rk.standard_tree(tmp_path_factory.mktemp("site") / "proj")
    lst = root / "LIST.md"
    text = lst.read_text(encoding="utf-8")
    lst.write_text(text.replace("A small list in the shape", MAINTAINERS + "A small list in the shape"), encoding="utf-8")
    publish(root, lst, root / "results")
    index = build_site(root, tmp_path_factory.mktemp("out") / "site")
    return root, recs, index


def test_pages_and_figures(site):
    root, _, index = site
    out = index.parent
    assert index.name == "index.html" and (out / "rooflines.html").is_file()
    assert {p.stem for p in (out / "claims").glob("*.html")} == {p.stem for p in (root / "claims").glob("*.yaml")}
    machines = {"nvidia-h200", "nvidia-h100", "nvidia-b200", "nvidia-gh200"}
    assert {p.name for p in out.glob("bandwidth-*.svg")} == {f"bandwidth-{m}.svg" for m in machines}
    # B200 measured only blackwell-time, which declares no flops: no roofline axes are drawn for it
    assert {p.name for p in out.glob("roofline-*.svg")} == {f"roofline-{m}.svg" for m in machines - {"nvidia-b200"}}
    roof = (out / "rooflines.html").read_text(encoding="utf-8")
    assert "blackwell-time</a>: declares no workload.flops" in roof and "Not on the roofline (so none is drawn)" in roof


def test_the_folder_stands_alone(site):
    """Every href and src resolves to a file inside the site folder, and every #anchor to an id."""
    _, _, index = site
    out = index.parent.resolve()
    checked = 0
    for page in out.rglob("*.html"):
        parsed = parse(page)
        for ref in parsed.refs:
            if urlparse(ref).scheme in ("http", "https"):
                continue
            path, _, anchor = ref.partition("#")
            target = (page.parent / unquote(path)).resolve() if path else page.resolve()
            assert target.is_file() and target.is_relative_to(out), f"{page.name}: {ref} leaves the site or is missing"
            if anchor:
                assert anchor in parse(target).ids, f"{page.name}: no id for {ref}"
            checked += 1
    assert checked > 60
    copies = list((out / "records").rglob("*.json"))
    assert len(copies) == 13 and all(c.read_bytes()[:1] == b"{" for c in copies)


def test_svgs_parse(site):
    _, _, index = site
    svgs = list(index.parent.rglob("*.svg"))
    assert len(svgs) >= 14
    for svg in svgs:
        assert ET.parse(svg).getroot().tag.endswith("svg")


def test_the_list_keeps_its_introduction_and_drops_empty_headings(site):
    root, _, index = site
    text = index.read_text(encoding="utf-8")
    assert "<h1>Fixture reading list</h1>" in text
    assert "<p>A small list in the shape of the real one, for publish and audit tests.</p>" in text
    flow = parse(index).flow
    for i, (kind, level) in enumerate(flow):
        if kind == "h":
            rest = flow[i + 1:]
            end = next((j for j, (k, lv) in enumerate(rest) if k == "h" and lv <= level), len(rest))
            assert any(k == "c" for k, _ in rest[:end]), f"empty heading at position {i}"
    assert '<h2 id="2-kernel-optimization">2. Kernel optimization</h2>' in text


def test_numbers_carry_interval_kernel_and_machine(site):
    _, recs, index = site
    text = index.read_text(encoding="utf-8")
    assert ('<strong>1.62×</strong> <span class="ci" title="95% confidence interval">[1.61, 1.63]</span> · '
            'fixture kernel softmax-online vs torch.softmax, eager · <span class="machine">H200</span> · bf16') in text
    assert '<span class="machine">H100 80GB HBM3</span>' in text  # the same claim on another machine
    assert f'href="records/softmax-online/{recs["softmax_h200"].name}"' in text
    assert "<script" not in text and "claimbench:" not in text.split("<code>")[0]


def test_claim_page_holds_the_evidence_and_the_reproduce_steps(site):
    _, recs, index = site
    commit = rk.Record.model_validate_json(recs["softmax_h200"].read_text()).git_commit
    page = (index.parent / "claims" / "softmax-online.html").read_text(encoding="utf-8")
    for needle in ('href="https://example.org/softmax-online"', "softmax-online-history.svg", "softmax-online-samples.svg",
                   "Correctness errors", "rel_l2 0.002", recs["softmax_h100"].name, "stale hash",
                   "needs      1 x NVIDIA H200 (compute capability 9.0, 132 SMs)",
                   f"git checkout --detach {commit} &amp;&amp; ./scripts/bootstrap.sh &amp;&amp; "
                   ".venv/bin/claimbench run claims/softmax-online.yaml",
                   f"claimbench reproduce results/records/softmax-online/{recs['softmax_h200'].name}"):
        assert needle in page, needle


def test_records_can_be_linked_under_a_base_url(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    rec = rk.write(root, rk.build(root, "softmax-online", kernel_us=150, baseline_us=243, seed=2))
    publish(root, root / "LIST.md", root / "results")
    index = build_site(root, tmp_path / "site", records_url="https://records.example.org/run-7/")
    text = index.read_text(encoding="utf-8")
    assert f'href="https://records.example.org/run-7/softmax-online/{rec.name}"' in text
    assert not (tmp_path / "site" / "records").exists()
    from claimbench.errors import UsageError
    with pytest.raises(UsageError, match="must be an http"):
        build_site(root, tmp_path / "site2", records_url="javascript:alert(1)")


def test_text_from_the_list_claims_and_records_is_escaped(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    lst = root / "LIST.md"
    lst.write_text(lst.read_text().replace(
        "A small list in the shape of the real one, for publish and audit tests.",
        "Intro <script>alert(1)</script> [click](javascript:alert(2)) <img src=x onerror=alert(3)> "
        "evil\u202etxt.exe `<!-- kept -->` <!-- hidden -->"))
    claim = root / "claims" / "deepgemm-fp8.yaml"
    claim.write_text(claim.read_text().replace("title: ", 'title: "<b onmouseover=alert(4)>x</b> \u2066" # ', 1))
    hostile = rk.build(root, "scan-decoupled", created="2026-12-01T09:00:00.000000Z", kernel_us=117.6, floor_us=100.0, seed=30)
    hw = {**hostile.hardware, "gpus": [{**hostile.hardware["gpus"][0], "name": "NVIDIA H200 <img src=x onerror=alert(5)>"}]}
    rk.write(root, hostile.model_copy(update={"hardware": hw}))
    publish(root, lst, root / "results")
    index = build_site(root, tmp_path / "site")
    everything = "".join(p.read_text(encoding="utf-8") for p in index.parent.rglob("*.html"))
    assert "<script" not in everything and "<img src=x" not in everything and "<b onmouseover" not in everything
    assert "javascript:" not in "".join(parse(p).refs.__str__() for p in index.parent.rglob("*.html"))
    assert "\u202e" not in everything and "\u2066" not in everything
    text = index.read_text(encoding="utf-8")
    assert "Intro &lt;script&gt;alert(1)&lt;/script&gt; click &lt;img src=x onerror=alert(3)&gt; evil[U+202E]txt.exe" in text
    assert "<code>&lt;!-- kept --&gt;</code>" in text and "hidden" not in text
    assert '<span class="machine">H200 &lt;img src=x onerror=alert(5)&gt;</span>' in text
    page = (index.parent / "claims" / "deepgemm-fp8.html").read_text(encoding="utf-8")
    assert "&lt;b onmouseover=alert(4)&gt;x&lt;/b&gt; [U+2066]" in page


def test_without_measured_records_nothing_is_drawn(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    index = build_site(root, tmp_path / "site")
    roof = (index.parent / "rooflines.html").read_text(encoding="utf-8")
    assert "No measured records yet" in roof and "<img" not in roof and not list(index.parent.glob("*.svg"))
    page = (index.parent / "claims" / "softmax-online.html").read_text(encoding="utf-8")
    assert "Nothing published" in page and "No records yet" in page and "<img" not in page


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def _chromium(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run"]
    with tempfile.TemporaryDirectory() as profile:
        return subprocess.run([CHROMIUM, *flags, f"--user-data-dir={profile}", *args],
                              capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(not CHROMIUM, reason="needs Debian's chromium for a headless render")
def test_chromium_renders_the_index_a_claim_page_and_the_rooflines(site, tmp_path):
    _, _, index = site
    dom = _chromium("--dump-dom", index.as_uri()).stdout
    assert "1.62×" in dom and "[1.61, 1.63]" in dom and "Blackwell Tuning Guide" in dom
    for page in (index, index.parent / "claims" / "softmax-online.html", index.parent / "rooflines.html"):
        shot = tmp_path / f"{page.stem}.png"
        _chromium(f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri())
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000, page.name


def test_site_never_clears_a_folder_it_did_not_write(tmp_path):
    """Issue 25: `site --out .` deleted claims/, `--out results` every record. Now a folder that
    holds project data, or files without the marker, is refused (exit 2) and left as it was."""
    from claimbench.cli import main
    from claimbench.errors import UsageError

    root, _ = rk.standard_tree(tmp_path / "proj")
    claims_before = sorted(p.name for p in (root / "claims").iterdir())
    records_before = sorted(str(p) for p in (root / "results" / "records").rglob("*.json"))
    for out in (root, root / "results", root / "results" / "records"):
        with pytest.raises(UsageError, match="claims or records"):
            build_site(root, out)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    (mine / "claims").mkdir()
    with pytest.raises(UsageError, match="did not write"):
        build_site(root, mine)
    assert (mine / "notes.txt").read_text() == "keep me" and (mine / "claims").is_dir()
    assert sorted(p.name for p in (root / "claims").iterdir()) == claims_before
    assert sorted(str(p) for p in (root / "results" / "records").rglob("*.json")) == records_before
    assert main(["--root", str(root), "site", "--out", str(root)]) == 2
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / ".claimbench-site").write_text("")
    (tmp_path / "earlier" / "claims").mkdir()
    built = build_site(root, tmp_path / "earlier")  # an earlier build's folder is rebuilt
    assert (built.parent / ".claimbench-site").is_file() and (built.parent / "claims").is_dir()


def test_the_first_screen_is_the_numbers_by_section(site):
    """Before the list: every published number under its top-level section, with its entry, interval,
    machine and record (issue 26: the first screen was the contents and a maintainer's note)."""
    _, recs, index = site
    text = index.read_text(encoding="utf-8")
    summary = text[text.index('<section class="summary">'):text.index("</section>")]
    assert text.index('<section class="summary">') < text.index("<h1>Fixture reading list</h1>") or \
        text.index('<section class="summary">') < text.index('<h2 id="2-kernel-optimization">')
    assert "<h3>2. Kernel optimization</h3>" in summary and "Online Normalizer Calculation for Softmax" in summary
    assert '<span class="machine">H200</span>' in summary and '<span class="machine">H100 80GB HBM3</span>' in summary
    assert f'href="records/softmax-online/{recs["softmax_h200"].name}"' in summary
    assert 'href="claims/softmax-online.html"' in summary


def test_maintainer_notes_stay_in_the_markdown(site):
    """What stands between `<!-- maintainers -->` markers is not for the site's reader; every line
    after it keeps its place (the numbers still attach to their entries)."""
    root, _, index = site
    assert MAINTAINERS in (root / "LIST.md").read_text(encoding="utf-8")  # publish kept it
    page = index.read_text(encoding="utf-8")
    assert "Edit the markers with care" not in page and "maintainers" not in page
    body = page[page.index("</section>"):]
    assert '<span class="machine">H200</span>' in body  # numbers still on their entries in the list itself


def test_free_form_blocks_of_any_shape_are_shown_not_crashed_on(tmp_path):
    """A record's `correctness`, `hardware.software` and `hardware.slug` are free-form: no verdict
    depends on their shape, so audit passes such a record. Before, a float for `trials`, a string
    for an output, a number for `git_dirty_files` or a 300-character slug stopped `site` and
    `show --record` with a traceback."""
    from claimbench.report.trail import show_record

    root = rk.copy_tree(tmp_path / "proj")
    good = rk.build(root, "scan-decoupled", created="2026-12-01T09:00:00.000000Z", kernel_us=117.6, floor_us=100.0, seed=31)
    odd = [good.model_copy(update={"correctness": {**good.correctness, "trials": 1.5}}),
           good.model_copy(update={"correctness": {**good.correctness, "trials": [7, {"outputs": ["x", 3, {"max_abs_err": 0.5}]}]},
                                   "created_utc": "2026-12-01T09:00:01.000000Z"}),
           good.model_copy(update={"hardware": {**good.hardware, "slug": "x" * 300,
                                                "software": {**good.hardware["software"], "git_dirty_files": 12}},
                                   "created_utc": "2026-12-01T09:00:02.000000Z"})]
    paths = [rk.write(root, r) for r in odd]
    publish(root, root / "LIST.md", root / "results")
    from claimbench.report.audit import audit
    assert not [p for p in audit(root, root / "LIST.md", root / "results", cache=False)
                if any(x.name in p.path for x in paths)]
    index = build_site(root, tmp_path / "site")
    assert any(p.name.startswith("bandwidth-xxxx") and len(p.name) < 80 for p in index.parent.iterdir())
    page = (index.parent / "claims" / "scan-decoupled.html").read_text(encoding="utf-8")
    assert "not a trial: 7" in page and "max_abs_err 0.5" in page
    shown = [show_record(p) for p in paths]
    assert "trial" not in shown[0].split("correctness")[1].split("sources")[0]
    assert "trial 1: FAILED not a trial: 7" in shown[1] and "output 0: max_abs_err 0.5" in shown[1]
    assert "changed" not in shown[2]


@settings(max_examples=300, deadline=None)
@given(hw=st.text(max_size=400))
def test_a_chart_name_from_any_hardware_slug_is_short_and_plain(hw):
    from claimbench.report.siteview import _file_slug

    slug = _file_slug(hw)
    assert re.fullmatch(r"[a-z0-9-]{1,60}", slug), slug  # a file name on any file system, whatever a record says


@pytest.mark.parametrize("link", ["style.css", "records", "claims", "site"])
def test_site_never_writes_through_a_link_a_commit_can_carry(tmp_path, link):
    """An adversarial review committed `results/site/` with the marker and `style.css -> a file
    outside`, `records -> a folder outside` and `claims -> ../../claims`: `site` overwrote the file,
    wrote record copies into the folder and about 40 pages into claims/, exit 0. Now it refuses
    (exit 2), naming the link, and writes nothing."""
    from claimbench.cli import main

    root, _ = rk.standard_tree(tmp_path / "proj")
    victim = tmp_path / "victim.txt"
    victim.write_text("mine")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    site = root / "results" / "site"
    if link == "site":  # the output folder itself
        site.symlink_to(elsewhere, target_is_directory=True)
    else:
        site.mkdir()
        (site / ".claimbench-site").write_text("")
        target = {"style.css": victim, "records": elsewhere, "claims": root / "claims"}[link]
        (site / link).symlink_to(target)
    claims_before = sorted(p.name for p in (root / "claims").iterdir())
    assert main(["--root", str(root), "site"]) == 2
    assert victim.read_text() == "mine" and list(elsewhere.iterdir()) == []
    assert sorted(p.name for p in (root / "claims").iterdir()) == claims_before
