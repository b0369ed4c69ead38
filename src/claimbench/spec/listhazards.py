"""Text in the list that a reader's renderer shows otherwise than claimbench reads it.

Why: audit compares each marker region with what publish would write, so a number there is checked;
but what a reader sees is the list as GitHub renders it, and an adversarial review (2026-12-06) made
the two differ with `audit` clean:
- a carriage return alone ends a line for CommonMark but not for claimbench's parser, so an entry's
  number rendered under a made-up entry written after it on the same line;
- a digit just before a region's opening marker made 3.50x read as 13.50x;
- text right after a region's closing marker ("· 2x H100 · bf16: 41.20x [40.90, 41.60]") read as part
  of the published number;
- a link reference definition whose label is the published interval (`[3.32, 3.65]: https://...`)
  turned the interval into a link to the attacker's page, and the definition line itself is invisible;
- a number in claimbench's own format outside every region, with a record link written as
  `results%2Frecords` and look-alike markers around it, was checked by nothing;
- bidirectional overrides and zero-width characters change what a line shows without changing what
  it says.
Each is a located problem in `audit`, named with its line.
"""

from __future__ import annotations

import html
import re
import unicodedata
from urllib.parse import unquote

from claimbench.spec.listing import blank_code, fenced
from claimbench.spec.markers import regions

_OPEN = "<!-- claimbench:"
# a value, its unit and an interval as publish writes them (3.50× [3.32, 3.65], 640 TFLOP/s [637, 642],
# 85% [85, 86], 12.3 µs [12.2, 12.3]), escaped brackets too
_NUMBER = re.compile(r"\d(?:[\d.,]*\d)?\s*(?:[^\s\[\]\d]{1,12}\s*)?\\?\[\s*-?\d[\d.,]*\s*,\s*-?\d[\d.,]*\s*\\?\]")
_REFDEF = re.compile(r"^ {0,3}\[((?:[^\[\]\\]|\\.){1,999})\]:")
_BRACKETED = re.compile(r"\[([^\[\]]{1,200})\]")
_ALLOWED_CONTROLS = {"\t", "\n", "\r"}


def hazards(text: str, records_folder: str = "results/records/") -> list[tuple[int, str]]:
    """(line, why) for each place the list would render otherwise than claimbench reads it."""
    out: list[tuple[int, str]] = []
    lines = text.removeprefix("\ufeff").split("\n")  # a byte-order mark at the start is the reader's to strip
    labels: dict[str, int] = {}
    region_texts: list[str] = []
    stripped = [raw[:-1] if raw.endswith("\r") else raw for raw in lines]
    for i, (line, code) in enumerate(zip(stripped, fenced(stripped)), start=1):
        if "\r" in line:
            out.append((i, "a carriage return without a line feed: GitHub ends a line there and claimbench does "
                           "not, so the two read different entries; use plain line ends"))
        odd = sorted({c for c in line if _invisible(c)})
        if odd:
            names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'control')}" for c in odd[:3])
            out.append((i, f"holds {names}: an invisible or direction-changing character changes what the line "
                           "shows without changing what it says; remove it"))
        if code:
            continue
        masked = blank_code(line)  # markers and numbers shown in code spans are text
        found = regions(masked) if _OPEN in masked else []
        for r in found:
            before = line[r.start - 1] if r.start else ""
            after = line[r.end:]
            if before and not before.isspace():
                out.append((i, f"{before!r} touches the claimbench marker region: it reads as part of the "
                               "published number; leave a space before the region"))
            if after.strip():
                out.append((i, "text after the claimbench marker region reads as part of the published number; "
                               "the region ends its line, so move the text before it"))
            region_texts.append(line[r.content[0]:r.content[1]])
        outside = _outside(masked, found)
        if _NUMBER.search(outside):
            out.append((i, "a number in claimbench's format outside every marker region: only `claimbench "
                           "publish` writes those, between its markers; remove it"))
        decoded = unquote(html.unescape(outside)).casefold()
        if records_folder.casefold() in decoded and records_folder.casefold() not in outside.casefold():
            out.append((i, f"names {records_folder} outside the markers, percent- or entity-encoded: numbers and "
                           "their records are written only by claimbench publish; remove it"))
        m = _REFDEF.match(line)
        if m:
            labels.setdefault(_label(m.group(1)), i)
    for text_in_region in region_texts:
        for m in _BRACKETED.finditer(text_in_region):
            at = labels.get(_label(m.group(1)))
            if at is not None:
                out.append((at, f"a link definition for [{m.group(1)}], text a marker region shows: it turns the "
                                "published text into a link; remove the definition"))
    return sorted(set(out))


def _invisible(c: str) -> bool:
    """Format characters (bidirectional controls, zero-width ones, a soft hyphen), other controls, and
    line or paragraph separators; a byte-order mark too, anywhere but the start, which the reader strips."""
    if c in _ALLOWED_CONTROLS:
        return False
    return unicodedata.category(c) in ("Cf", "Cc", "Zl", "Zp")


def _outside(line: str, found) -> str:
    """The line with its marker regions blanked out."""
    if not found:
        return line
    parts, at = [], 0
    for r in found:
        parts.append(line[at:r.start])
        at = r.end
    parts.append(line[at:])
    return " ".join(parts)


def _label(s: str) -> str:
    """A link label as CommonMark matches it: case-folded, inner whitespace collapsed, escapes dropped."""
    return " ".join(re.sub(r"\\(.)", r"\1", s).casefold().split())
