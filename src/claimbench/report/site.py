"""A static site of the list, its claims and their records: HTML from jinja2 templates, SVG plots.

Pages: `index.html` (the list as written, introduction and prose included, with its published
numbers), `claims/<id>.html` (source, policy fields, how to reproduce, history per machine, raw
samples, per-trial correctness errors, every record) and `rooflines.html` (per machine: the
measured ceilings, each claim with flops at its arithmetic intensity, and each claim with bytes
by its achieved bandwidth; a claim that cannot be placed is named with the reason).

The folder stands alone: the records it links are copied into `records/` beside the pages, or,
with `records_url`, linked under that base URL instead. All text from claims, records and the
list goes through autoescaping and `sitemd.clean`; only http(s) links become links.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
from importlib import resources
from pathlib import Path
from typing import Optional
from urllib.parse import quote

from claimbench.gate.gatecache import gate_cached
from claimbench.report.publish import plan
from claimbench.report.sitemd import clean, drop_maintainer_notes, render, safe_url
from claimbench.report.siteplots import number
from claimbench.report.siteview import claim_view, number_view, roofline_sections
from claimbench.spec.bounded import read_text
from claimbench.spec.listing import parse_list
from claimbench.store.index import read_index
from claimbench.store.record import Record, RecordError, load_record
from claimbench.store.summary import Summary

SAFE_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
SAFE_RECORD = re.compile(r"records/[a-z0-9][a-z0-9._-]{0,99}/[A-Za-z0-9][A-Za-z0-9._-]{0,199}\.json")


def _environment():
    from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
    from markupsafe import Markup

    env = Environment(loader=PackageLoader("claimbench", "templates"), autoescape=select_autoescape(["html"]),
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True,
                      finalize=lambda v: v if isinstance(v, Markup) or not isinstance(v, str) else clean(v))
    env.filters["url"] = safe_url
    env.filters["number"] = number
    return env


class Links:
    """Where a page's record links point: a copy inside the site, or `base_url`."""

    def __init__(self, out: Path, results: Path, base_url: Optional[str]):
        self.out, self.results = out, results
        self.base = base_url.rstrip("/") + "/" if base_url else None
        self.copied: set[str] = set()

    def record(self, rel: str, depth: int) -> Optional[str]:
        """The href of `rel` (relative to the results folder) from a page `depth` folders down."""
        if not SAFE_RECORD.fullmatch(rel):
            return None  # a name the runner never writes: no link, and nothing copied
        if self.base:
            return self.base + quote(rel.removeprefix("records/"))
        if rel not in self.copied:
            src = self.results / rel
            if not src.is_file():
                return None
            dst = self.out / rel
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            self.copied.add(rel)
        return "../" * depth + quote(rel)


def build_site(root: Path, out_dir: Path, *, list_path: Optional[Path] = None,
               results_dir: Optional[Path] = None, records_url: Optional[str] = None) -> Path:
    """Write the site into `out_dir`; returns the index page."""
    from claimbench.report import siteplots

    siteplots.setup()
    root, out = Path(root), Path(out_dir)
    list_path = Path(list_path) if list_path else root / "LIST.md"
    results_dir = Path(results_dir) if results_dir else root / "results"
    if records_url is not None and not safe_url(records_url):
        from claimbench.errors import UsageError
        raise UsageError(f"--records-url {records_url!r}: must be an http(s) URL")
    _own(out, root, results_dir)
    for stale in ("claims", "records"):  # pages and copies of an earlier build
        shutil.rmtree(out / stale, ignore_errors=True)
    for svg in [*out.glob("roofline-*.svg"), *out.glob("bandwidth-*.svg")]:
        svg.unlink()
    (out / "claims").mkdir(parents=True, exist_ok=True)
    env = _environment()
    links = Links(out, results_dir, records_url)
    text = read_text(list_path, what="list")
    listing = parse_list(text, str(list_path))
    p = plan(root, list_path, results_dir)
    summaries = read_index(results_dir).summaries
    files = sorted({f"claims/{f.name}" for f in (root / "claims").glob("*.yaml")})
    checked = {Path(f).stem: r for f, r in zip(files, gate_cached(files, root, listing))}
    by_path = {s.path: s for s in summaries}
    records: dict[str, Optional[Record]] = {}

    def record(rel: str) -> Optional[Record]:
        if rel not in records:
            try:
                records[rel] = load_record(results_dir / rel)
            except RecordError:
                records[rel] = None
        return records[rel]

    claims = {cid: (r.claim if r is not None else None) for cid, r in checked.items()}
    numbers = [number_view(n, by_path.get(n.record), record(n.record), claim=claims.get(n.claim_id)) for n in p.numbers]
    by_claim: dict[str, list[Summary]] = {}
    for s in summaries:
        by_claim.setdefault(s.claim_id, []).append(s)
    page = env.get_template("claim.html")
    for cid in sorted(c for c in set(checked) | set(by_claim) if SAFE_ID.fullmatch(c)):
        recs = sorted(by_claim.get(cid, []), key=lambda s: (s.created_utc, s.path), reverse=True)
        view = claim_view(cid, checked.get(cid), recs, numbers=[n for n in numbers if n.claim_id == cid],
                          removed=[r for r in p.removed if r.claim_id == cid], record=record, links=links,
                          page_dir=out / "claims", results_dir=results_dir)
        (out / "claims" / f"{cid}.html").write_text(page.render(depth=1, title=f"Claim {cid}", **view), encoding="utf-8")
    measured = [s for s in summaries if s.ok and s.mode == "measured" and s.point is None]  # claims' own points
    sections = roofline_sections(measured, record, out, claims=claims)
    (out / "rooflines.html").write_text(env.get_template("rooflines.html").render(
        depth=0, title="Rooflines", sections=sections, any_measured=bool(measured)), encoding="utf-8")
    _index(env, out, listing, text=text, numbers=numbers, checked=checked, links=links)
    (out / "style.css").write_bytes(resources.files("claimbench").joinpath("templates").joinpath("style.css").read_bytes())
    return out / "index.html"


MARKER = ".claimbench-site"  # in every folder `site` wrote: the one kind of folder it clears


def _own(out: Path, root: Path, results_dir: Path) -> None:
    """Refuse an output folder `site` did not make: it deletes its earlier pages there, and a
    folder holding the project's claims or records (`--out .`, `--out results`) must never lose them.
    An empty or new folder gets the marker; one with the marker is an earlier build."""
    from claimbench.errors import UsageError

    o = out.resolve()
    guarded = [Path(root).resolve(), Path(results_dir).resolve(), (Path(results_dir) / "records").resolve()]
    if any(o == g or g.is_relative_to(o) for g in guarded):
        raise UsageError(f"--out {out}: holds the project's claims or records; choose a folder of its own "
                         f"(default {Path(results_dir) / 'site'})")
    if (link := _link_in(out, root)) is not None:
        raise UsageError(f"--out {out}: {link} is a symbolic link or not a plain file or folder; `site` writes only "
                         "into folders of its own, never through a link (a committed one would send its pages "
                         "elsewhere); remove it, or choose another folder")
    if o.is_dir() and any(o.iterdir()) and not (o / MARKER).is_file():
        raise UsageError(f"--out {out}: the folder holds files `claimbench site` did not write (no {MARKER} "
                         "marker), which a rebuild would delete; choose an empty folder or an earlier site's")
    o.mkdir(parents=True, exist_ok=True)
    (o / MARKER).write_text("written by claimbench site; a rebuild replaces what it wrote here\n", encoding="utf-8")


def _link_in(out: Path, root: Path) -> Optional[Path]:
    """The first link (or FIFO, device, socket) at or under ``out``, or on the way to it from inside
    the project; None when there is none. `site` never makes one, so one there came from elsewhere:
    a commit can carry `results/site/style.css -> ~/.bashrc`, and writing the page would have
    overwritten the file it names (an adversarial review: a file outside the project overwritten,
    a folder outside written into, and pages written into claims/)."""
    out = Path(out).absolute()
    root = Path(root).absolute()
    # inside the project, every folder on the way (a commit can carry any of them); a folder outside
    # it is the user's own choice, link or not
    way = [p for p in (out, *out.parents) if p != root and p.is_relative_to(root)]
    for p in way:
        if p.is_symlink():
            return p
    if not out.is_dir():
        return None
    for folder, dirs, files in os.walk(out):  # never follows a link
        for name in (*dirs, *files):
            p = Path(folder) / name
            try:
                mode = os.lstat(p).st_mode
            except OSError:
                continue
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                return p
    return None


def _index(env, out: Path, listing, *, text: str, numbers: list, checked: dict, links: Links) -> None:
    nums: dict[int, list] = {}
    for n in numbers:
        nums.setdefault(n.entry_line, []).append(n)
    claims_of: dict[str, list[str]] = {}
    for cid, r in checked.items():
        if r.claim is None or not SAFE_ID.fullmatch(cid):
            continue
        try:
            claims_of.setdefault(listing.find(r.claim.entry).key, []).append(cid)
        except Exception:  # an entry that does not resolve shows on the claim's own page
            pass
    by_line = {e.line: e for e in listing.entries}
    macro = env.get_template("parts.html").module

    def extras(line: int):
        entry = by_line.get(line)
        if entry is None:
            return ""
        shown = nums.get(line, [])
        others = sorted(c for c in claims_of.get(entry.key, []) if not any(n.claim_id == c for n in shown))
        return macro.entry_extras([(n, links.record(n.record, 0)) for n in shown], others)

    heads = {h.line: (h.level, h.text) for h in listing.headings}
    title = listing.headings[0].text if listing.headings else "The list"
    _, body = render(drop_maintainer_notes(text), heads, extras)
    (out / "index.html").write_text(env.get_template("index.html").render(
        depth=0, title=title, body=body, summary=_summary(listing, numbers, links),
        claims=sum(1 for r in checked.values() if r.claim is not None)), encoding="utf-8")


def _summary(listing, numbers: list, links: Links) -> list[tuple[str, list]]:
    """The first screen: every published number, grouped by the list's top-level section in list
    order, each with its entry, machine, interval and record (a reader came for the numbers)."""
    entries = {e.line: e for e in listing.entries}
    title = listing.headings[0].text if listing.headings and listing.headings[0].level == 1 else None
    sections: dict[str, list] = {}
    for n in sorted(numbers, key=lambda n: n.entry_line):
        e = entries.get(n.entry_line)
        path = e.path[1:] if e is not None and e.path[:1] == (title,) else (e.path if e is not None else ())
        top = path[0] if path else (title or "The list")  # the section under the list's own title
        sections.setdefault(top, []).append((n, e.name if e is not None else n.entry_key, links.record(n.record, 0)))
    return list(sections.items())
