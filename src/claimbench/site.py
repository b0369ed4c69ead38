"""A static site of the list, its claims and their records: plain HTML and SVG, no server, no JS.

Pages: `index.html` (the list with its published numbers), `claims/<id>.html` (policy fields,
source, history of the value per hardware, raw-sample histograms, per-trial correctness errors,
every record), and `rooflines.html` (per hardware: the measured ceilings, and each claim's
kernel and baseline as points). Plots are matplotlib SVGs made with the Agg backend.
"""

from __future__ import annotations

import html
import os
import re
from datetime import datetime
from pathlib import Path
from typing import Optional

from .index import Summary, read_index
from .listing import parse_list
from .claimcheck import check_claims
from .publish import plan
from .record import Record, load_record

CSS = """body{font:15px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
a{color:#0550ae}h1,h2,h3{line-height:1.2}.num{background:#e6f4ea;border-radius:4px;padding:0 .3em;margin-left:.3em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left;font-size:13px}
.verified{color:#137333;font-weight:600}.bad{color:#a50e0e}.muted{color:#666}nav a{margin-right:1em}
img{max-width:100%;border:1px solid #eee}li{margin:.25em 0}code{background:#f3f3f3;padding:0 .2em}"""
_LINK = re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)")
_REGION = re.compile(r"\s*<!--\s*claimbench:.*?<!--\s*/claimbench\s*-->")
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d{1,9}[.)])\s+")


def _e(x) -> str:
    return html.escape(str(x), quote=True)


def _rel(target: Path, page_dir: Path) -> str:
    return Path(os.path.relpath(Path(target).resolve(), Path(page_dir).resolve())).as_posix()


def _page(title: str, body: str, depth: int = 0) -> str:
    up = "../" * depth
    return (f"<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{_e(title)}</title>"
            f"<link rel=\"stylesheet\" href=\"{up}style.css\"></head><body>\n<nav><a href=\"{up}index.html\">List</a>"
            f"<a href=\"{up}rooflines.html\">Rooflines</a></nav>\n<h1>{_e(title)}</h1>\n{body}\n</body></html>\n")


def _inline(text: str) -> str:
    """Escaped text with http(s) Markdown links as anchors; other links stay text."""
    out, pos = [], 0
    for m in _LINK.finditer(text):
        out += [_e(text[pos:m.start()]), f'<a href="{_e(m.group(2))}">{_e(m.group(1))}</a>']
        pos = m.end()
    return "".join(out + [_e(text[pos:])]).replace("**", "")


def _svg(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="svg", metadata={"Date": None}, bbox_inches="tight")
    plt.close(fig)


def _when(s: Summary) -> datetime:
    return datetime.fromisoformat(s.created_utc.replace("Z", "+00:00"))


def history_plot(recs: list[Summary], claimed: Optional[dict], path: Path) -> None:
    """Value over time per hardware, with its 95% CI; filled markers are verified runs."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.2))
    for hw in sorted({s.hardware for s in recs}):
        pts = sorted((s for s in recs if s.hardware == hw and s.value is not None), key=lambda s: s.created_utc)
        if not pts:
            continue
        x, y = [_when(s) for s in pts], [s.value for s in pts]
        err = [[max(0.0, s.value - (s.ci_low if s.ci_low is not None else s.value)) for s in pts],
               [max(0.0, (s.ci_high if s.ci_high is not None else s.value) - s.value) for s in pts]]
        line = ax.errorbar(x, y, yerr=err, marker="o", ms=4, capsize=2, lw=1, label=hw, mfc="white")
        ver = [(a, b) for a, b, s in zip(x, y, pts) if s.verdict == "verified"]
        if ver:
            ax.plot(*zip(*ver), "o", ms=5, color=line[0].get_color())
    if claimed:
        ax.axhline(claimed["value"], ls="--", color="#888", lw=1, label=f"claimed {claimed['value']:g}")
    ax.set_ylabel(claimed["metric"] if claimed else "value")
    ax.legend(fontsize=7, loc="best")
    fig.autofmt_xdate()
    _svg(fig, path)


def histogram_plot(recs: list[Record], path: Path) -> None:
    """Raw timing samples of kernel and baseline, one panel per hardware (latest run on each)."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(recs), 2, figsize=(8, 2.2 * len(recs)), squeeze=False)
    for row, r in zip(axes, recs):
        for ax, name, side, color in ((row[0], "kernel", r.kernel, "#137333"), (row[1], "baseline", r.baseline, "#a50e0e")):
            if side.samples_us:
                ax.hist(side.samples_us, bins=20, color=color, alpha=0.75)
                ax.axvline(side.median_us or 0, color="#222", lw=1)
            ax.set_title(f"{name}, {r.hardware_slug} {r.created_utc[:10]} (n={len(side.samples_us)})", fontsize=8)
            ax.set_xlabel("time per call (µs)", fontsize=8)
            ax.tick_params(labelsize=7)
    fig.tight_layout()
    _svg(fig, path)


def _bandwidth_panel(ax, bw, bars: list[tuple[str, float, float]]) -> None:
    """Claims without flops still have bytes: their achieved GB/s against the measured copy bandwidth."""
    bars = sorted(bars, key=lambda t: -t[1])[:30]
    y = list(range(len(bars)))
    ax.barh([i + 0.2 for i in y], [k for _, k, _ in bars], height=0.4, color="#137333", label="kernel")
    ax.barh([i - 0.2 for i in y], [b for _, _, b in bars], height=0.4, color="#a50e0e", label="baseline")
    ax.set_yticks(y, [c for c, _, _ in bars], fontsize=6)
    ax.set_ylim(-0.7, max(len(bars), 6) - 0.3)
    if bw:
        ax.axvline(bw, color="#222", ls="--", lw=1, label=f"measured copy {bw:g} GB/s")
    ax.set_xlabel("achieved GB/s (declared bytes / median time)")
    ax.legend(fontsize=7, loc="upper right")


def roofline_plot(hw: str, ceilings: dict, points: list[tuple[str, float, float, float]], path: Path,
                  bars: list[tuple[str, float, float]] = ()) -> None:
    """Measured ceilings (copy bandwidth, matmul rate per dtype); kernel ● and baseline ▲ per claim
    with flops; beside it, achieved bandwidth of every claim with bytes (30 fastest at most)."""
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.5), gridspec_kw={"width_ratios": [3, 2]})
    ai = np.logspace(-2, 4, 200)
    bw = ceilings.get("bandwidth_gbps")
    mm = ceilings.get("matrix_tflops")
    rates = mm if isinstance(mm, dict) else ({"matrix": mm} if mm else {})
    for name, rate in sorted(rates.items()):
        if bw and rate:
            ax.plot(ai, np.minimum(bw * ai / 1e3, rate), lw=1.5, label=f"{name}: {rate:g} TFLOP/s, {bw:g} GB/s")
    if bw and not rates:
        ax.plot(ai, bw * ai / 1e3, lw=1.5, label=f"copy bandwidth {bw:g} GB/s")
    _bandwidth_panel(bx, ceilings.get("bandwidth_gbps"), bars)
    for claim, x, k, b in points:
        ax.plot([x], [k], "o", color="#137333", ms=5)
        if b:
            ax.plot([x], [b], "^", color="#a50e0e", ms=5)
            ax.plot([x, x], [k, b], color="#bbb", lw=0.8)
        if len(points) <= 25:
            ax.annotate(claim, (x, k), fontsize=6, xytext=(3, 3), textcoords="offset points")
    ax.plot([], [], "o", color="#137333", label="kernel")
    ax.plot([], [], "^", color="#a50e0e", label="baseline")
    ax.set(xscale="log", yscale="log", xlabel="arithmetic intensity (FLOP/byte)", ylabel="TFLOP/s", title=hw)
    ax.legend(fontsize=7, loc="lower right")
    _svg(fig, path)


def _table(head: list[str], rows: list[list[str]]) -> str:
    th = "".join(f"<th>{_e(h)}</th>" for h in head)
    return f"<table><tr>{th}</tr>" + "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows) + "</table>"


def _claim_page(out: Path, cid: str, result, recs: list[Summary], numbers, removed, results_dir) -> None:
    page_dir = out / "claims"
    c = result.claim if result is not None else None
    body = []
    if c is not None:
        s = c.source
        body.append(f"<p>{_e(c.title)}</p><p>Source ({_e(s.kind)}): <a href=\"{_e(s.url)}\">{_e(s.title)}</a>, {_e(s.locator)}</p>")
        rows = [[_e(k), _e("; ".join(f"{f}: {v}" for f, v in getattr(c, k).model_dump(exclude_none=True).items() if v not in ([], {})))]
                for k in ("hardware", "workload", "precision", "kernel", "baseline", "correctness", "claimed")]
        body.append("<h2>Policy fields</h2>" + _table(["field", "value"], [["entry", _e(c.entry)]] + rows))
    if result is not None:
        status = "passes check" if result.ok else "fails check: " + "; ".join(str(p) for p in result.problems)
        body.append(f"<p class=\"{'verified' if result.ok else 'bad'}\">Claim {_e(status)}</p>")
    body.append("<h2>On the list</h2><ul>" + "".join(f"<li class=\"verified\">{_e(n.entry_key)}: {_number(n, results_dir, page_dir)}</li>" for n in numbers)
                + "".join(f"<li class=\"bad\">off on {_e(r.hardware)}: {_e(r.why)}</li>" for r in removed)
                + ("" if numbers or removed else "<li class=\"muted\">nothing published</li>") + "</ul>")
    measured = [s for s in recs if s.ok and s.mode == "measured"]
    if measured:
        history_plot(measured, c.claimed.model_dump() if c else None, page_dir / f"{cid}-history.svg")
        body.append(f"<h2>History</h2><img src=\"{cid}-history.svg\" alt=\"value over time per hardware\">")
        latest = {}
        for s in sorted(measured, key=lambda s: s.created_utc, reverse=True):
            latest.setdefault(s.hardware, s)
        full = [load_record(results_dir / s.path) for s in list(latest.values())[:4]]
        full = [r for r in full if r.kernel.samples_us]
        if full:
            histogram_plot(full, page_dir / f"{cid}-samples.svg")
            body.append(f"<h2>Raw samples</h2><img src=\"{cid}-samples.svg\" alt=\"histograms of raw samples\">")
            body.append("<h2>Correctness errors (latest run per hardware)</h2>" + "".join(_trials(r) for r in full))
    rows = [[_e(s.created_utc[:19]), _e(s.hardware), f"<span class=\"{'verified' if s.verdict == 'verified' else ''}\">{_e(s.verdict or 'unreadable')}</span>",
             _e(f"{s.value:.4g}" if s.value is not None else ""),
             _e(f"[{s.ci_low:.4g}, {s.ci_high:.4g}]" if s.ci_low is not None else ""),
             _e((s.git_commit or "")[:10] + (" dirty" if s.git_dirty else "")),
             f"<a href=\"{_e(_rel(results_dir / s.path, page_dir))}\">json</a>"] for s in recs]
    body.append("<h2>Records</h2>" + _table(["created (UTC)", "hardware", "verdict", "value", "95% CI", "commit", "record"], rows))
    (page_dir / f"{cid}.html").write_text(_page(f"Claim {cid}", "\n".join(body), depth=1), encoding="utf-8")


def _number(n, results_dir: Path, page_dir: Path) -> str:
    """A published number as HTML, its record link pointing at the JSON from this page."""
    text = n.text.replace(" · [record](", " · (").split(" · (")[0] if "[record](" in n.text else n.text
    return f"{_e(text)} · <a href=\"{_e(_rel(results_dir / n.record, page_dir))}\">record</a>" + (" · dirty" if n.dirty else "")


def _trials(r: Record) -> str:
    rows = []
    for i, t in enumerate(r.correctness.get("trials") or []):
        if isinstance(t, dict):
            errs = "; ".join(", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}"
                                       for k, v in o.items() if k not in ("passed", "reason", "shape"))
                             for o in t.get("outputs") or [] if isinstance(o, dict))
            rows.append([str(i + 1), _e(t.get("seed", "")), "passed" if t.get("passed") else _e(f"FAILED {t.get('reason', '')}"), _e(errs)])
    return f"<h3>{_e(r.hardware_slug)}</h3>" + (_table(["trial", "seed", "result", "errors"], rows) if rows else "<p class=\"muted\">no per-trial data</p>")


def build_site(root: Path, out_dir: Path, *, list_path: Optional[Path] = None,
               results_dir: Optional[Path] = None) -> Path:
    """Write the site into `out_dir`; returns the index page."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "claimbench"  # stable ids: the same records give the same SVG
    root = Path(root)
    out = Path(out_dir)
    list_path = Path(list_path) if list_path else root / "LIST.md"
    results_dir = Path(results_dir) if results_dir else root / "results"
    (out / "claims").mkdir(parents=True, exist_ok=True)
    (out / "style.css").write_text(CSS, encoding="utf-8")
    text = list_path.read_text(encoding="utf-8")
    listing = parse_list(text, str(list_path))
    p = plan(root, list_path, results_dir)
    summaries = read_index(results_dir).summaries
    files = sorted({f"claims/{f.name}" for f in (root / "claims").glob("*.yaml")})
    checked = {Path(f).stem: r for f, r in zip(files, check_claims(files, root, listing))}
    by_claim: dict[str, list[Summary]] = {}
    for s in summaries:
        by_claim.setdefault(s.claim_id, []).append(s)
    safe = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")  # a record's claim_id becomes a file name
    for cid in sorted(c for c in set(checked) | set(by_claim) if safe.fullmatch(c)):
        recs = sorted(by_claim.get(cid, []), key=lambda s: s.created_utc, reverse=True)
        _claim_page(out, cid, checked.get(cid), recs, [n for n in p.numbers if n.claim_id == cid],
                    [r for r in p.removed if r.claim_id == cid], results_dir)
    _rooflines(out, [s for s in summaries if s.ok and s.mode == "measured"], results_dir)
    _index(out, listing, text, p, checked, results_dir)
    return out / "index.html"


def _rooflines(out: Path, measured: list[Summary], results_dir: Path) -> None:
    body = ["<p>Ceilings are the ones each run measured (copy bandwidth, matmul rate), never datasheet peaks. "
            "Each claim with <code>workload.flops</code> appears at its arithmetic intensity; kernel ●, baseline ▲ "
            "(latest measured run on that hardware).</p>"]
    for hw in sorted({s.hardware for s in measured}):
        latest: dict[str, Summary] = {}
        for s in sorted((s for s in measured if s.hardware == hw), key=lambda s: s.created_utc, reverse=True):
            latest.setdefault(s.claim_id, s)
        points, bars, ceilings = [], [], {}
        for cid, s in sorted(latest.items()):
            r = load_record(results_dir / s.path)
            ceilings = ceilings or r.ceilings
            k, b = r.kernel.median_us, r.baseline.median_us
            if r.flops and r.bytes and k:
                points.append((cid, r.flops / r.bytes, r.flops / k / 1e6, r.flops / b / 1e6 if b else 0.0))
            if r.bytes and k:
                bars.append((cid, r.bytes / k / 1e3, r.bytes / b / 1e3 if b else 0.0))
        slug = re.sub(r"[^a-z0-9-]+", "-", hw.lower())
        roofline_plot(hw, ceilings, points, out / f"roofline-{slug}.svg", bars)
        body.append(f"<h2>{_e(hw)}</h2><p>{len(points)} claim(s) placed.</p>"
                    f"<img src=\"roofline-{slug}.svg\" alt=\"roofline for {_e(hw)}\">")
    (out / "rooflines.html").write_text(_page("Rooflines", "\n".join(body)), encoding="utf-8")


def _index(out: Path, listing, text: str, p, checked, results_dir: Path) -> None:
    lines = text.split("\n")
    nums: dict[int, list] = {}
    for n in p.numbers:
        nums.setdefault(n.entry_line, []).append(n)
    claims_of: dict[str, list[str]] = {}
    for cid, r in checked.items():
        if r.claim is not None:
            try:
                claims_of.setdefault(listing.find(r.claim.entry).key, []).append(cid)
            except Exception:  # an entry that does not resolve shows on the claim's own page
                pass
    body, open_list = [], False
    title = listing.headings[0].text if listing.headings else "The list"
    heads = [h for h in listing.headings if h.line != 1 or h.text != title]
    events = sorted([(h.line, "h", h) for h in heads] + [(e.line, "e", e) for e in listing.entries])
    for _, kind, item in events:
        if kind == "h":
            body.append("</ul>" if open_list else "")
            open_list = False
            level = min(6, item.level + 1)
            body.append(f"<h{level}>{_e(item.text)}</h{level}>")
            continue
        if not open_list:
            body.append("<ul>")
            open_list = True
        raw = _ITEM.sub("", _REGION.sub("", lines[item.line - 1]), count=1)
        extra = "".join(f"<span class=\"num\">{_number(n, results_dir, out)} · "
                        f"<a href=\"claims/{_e(n.claim_id)}.html\">claim</a></span>" for n in nums.get(item.line, []))
        links = "".join(f" <a class=\"muted\" href=\"claims/{_e(c)}.html\">[{_e(c)}]</a>"
                        for c in sorted(claims_of.get(item.key, [])) if not any(n.claim_id == c for n in nums.get(item.line, [])))
        body.append(f"<li>{_inline(raw)}{extra}{links}</li>")
    body.append("</ul>" if open_list else "")
    (out / "index.html").write_text(_page(title, "\n".join(body)), encoding="utf-8")
