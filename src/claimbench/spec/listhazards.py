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
A second review went around the first rules with raw HTML (a fence hidden in a comment switched
every check off for the lines after it; `</li><li>` made a new bullet; an unclosed `<a href>` linked the
number), entities (`&#91;` for a bracket, `&#8238;` for a direction override), a definition inside a
blockquote, text on the next line (it renders in the same paragraph, after the number), a hair space
before a region, a long run of digits (the first number check took time that grew with its square).
So the rules are by family: the list outside its marker regions is Markdown without raw HTML,
entities or link definitions, a region ends its paragraph, and a number is looked for in the text a
reader sees (escapes undone, invisible marks removed). Each is a located problem in `audit`.
"""

from __future__ import annotations

import html
import posixpath
import re
import unicodedata
from urllib.parse import unquote

from claimbench.spec.listing import blank_code, fenced, unclosed_fence
from claimbench.spec.markers import regions

_OPEN = "<!-- claimbench:"
_MAINTAINERS = {"<!-- maintainers -->", "<!-- /maintainers -->"}  # whole lines: notes for the list's editors
_HTML = re.compile(r"<[A-Za-z/!?]")  # a tag, a closing tag, a comment or declaration, a processing instruction
_ENTITY = re.compile(r"&(?:#[0-9]{1,8}|#[xX][0-9a-fA-F]{1,8}|[A-Za-z][A-Za-z0-9]{1,40});")
# an interval as publish writes it ([3.32, 3.65]); the number and unit before it are looked for in a short
# window, so the scan is linear whatever the line holds (a run of digits made the first version quadratic)
_INTERVAL = re.compile(r"\[\s*-?\d[\d.]*\s*,\s*-?\d[\d.]*\s*\]")  # no comma inside a number: linear
_LEAD = re.compile(r"\d[^\s\[\]]{0,12}(?:\s{1,3}[^\s\[\]]{1,12})?\s{0,3}$")
_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
# a line that starts a block of its own, so it does not continue the paragraph of the line before
_NEW_BLOCK = re.compile(r"^\s*$|^ {0,3}(?:[-*+]|\d{1,9}[.)])(?:\s|$)|^ {0,3}(?:#{1,6}(?:\s|$)|>|`{3,}|~{3,}|[-*_](?:\s*[-*_]){2,}\s*$)")
_SPACES = {" ", "\u00a0"}
_INDENTED_FENCE = re.compile(r"^[ \t]+(?:`{3,}|~{3,})")
_ODD_BULLET = re.compile(r"^[ \t]*[•◦▪‣∙]")
# what a reader sees of inline markup: an empty link or image is nothing, a link is its text, emphasis
# and strike-through marks and code ticks are not shown
_EMPTY_LINK = re.compile(r"!?\[\]\([^()\n]{0,500}\)")
_LINK = re.compile(r"!?\[((?:[^\[\]\n]|\[[^\[\]\n]{0,500}\]){0,500})\]\([^()\n]{0,500}\)")  # one level of brackets inside
_MARKS = re.compile(r"[*_~`]+")


def hazards(text: str, records_folder: str = "results/records/") -> list[tuple[int, str]]:
    """(line, why) for each place the list would render otherwise than claimbench reads it."""
    out: list[tuple[int, str]] = []
    lines = [raw[:-1] if raw.endswith("\r") else raw
             for raw in text.removeprefix("\ufeff").split("\n")]  # a leading byte-order mark is the reader's to strip
    code = fenced(lines)
    if (opened := unclosed_fence(lines)) is not None:
        out.append((opened, "a code fence that never closes: GitHub ends it with its list item or quote, claimbench "
                            "at the end of the list, so the two read every line after it differently; close it"))
    folder = records_folder.casefold()
    after_region = False
    paragraph: list[tuple[int, str]] = []  # (line, its text outside the regions) of the paragraph being read
    for i, (line, in_code) in enumerate(zip(lines, code), start=1):
        if _INDENTED_FENCE.match(line):
            out.append((i, "an indented code fence: inside a list item GitHub ends the block with the item and "
                           "claimbench does not, so the two read the lines after it differently; start a fence at "
                           "the beginning of its line"))
        if _ODD_BULLET.match(line):
            out.append((i, "a bullet GitHub does not read as one (only -, * and + are): the line joins the paragraph "
                           "above it there; write the entry with -"))
        if "\r" in line:
            out.append((i, "a carriage return without a line feed: GitHub ends a line there and claimbench does "
                           "not, so the two read different entries; use plain line ends"))
        odd = sorted({c for k, c in enumerate(line) if _invisible(c, line[k - 1] if k else "")})
        if odd:
            names = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'control')}" for c in odd[:3])
            out.append((i, f"holds {names}: an invisible, direction-changing or look-alike space or mark changes "
                           "what the line shows without changing what it says; remove it"))
        if in_code or not line.strip():
            out += _paragraph_problems(paragraph)
            paragraph = []
            after_region = False
            if in_code:
                continue
        if after_region and not _NEW_BLOCK.match(line):
            out.append((i, "continues the paragraph of the line above, so GitHub shows it right after that line's "
                           "published number; leave a blank line, or start a new entry"))
        masked = blank_code(line)  # markers and numbers shown in code spans are text
        found = regions(masked) if _OPEN in masked else []
        for r in found:
            if r.start and line[r.start - 1] != " ":
                out.append((i, f"{line[r.start - 1]!r} touches the claimbench marker region: it reads as part of "
                               "the published number; publish leaves one plain space before the region"))
            if line[r.end:].strip():
                out.append((i, "text after the claimbench marker region reads as part of the published number; "
                               "the region ends its line, so move the text before it"))
        after_region = bool(found)
        outside = _outside(masked, found)
        out += [(i, why) for why in _outside_problems(line, outside, folder)]
        if paragraph and _NEW_BLOCK.match(line):  # a list item, heading or quote starts a block of its own
            out += _paragraph_problems(paragraph)
            paragraph = []
        paragraph.append((i, outside))
    out += _paragraph_problems(paragraph)
    return sorted(set(out))


def _paragraph_problems(paragraph: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """A number in claimbench's format in a paragraph's text outside the regions, as a reader sees it: its
    lines joined (a soft break is a space), escapes undone, compatibility forms folded (fullwidth brackets),
    empty links dropped, links shown as their text, emphasis and code marks removed, runs of white space
    one (an adversarial review split a number over two lines, padded it with 30 spaces, put an empty link
    or emphasis inside its interval, and wrapped the interval in a link: each read as a published number)."""
    if not paragraph:
        return []
    text = unicodedata.normalize("NFKC", _ESCAPE.sub(r"\1", " ".join(t for _, t in paragraph)))
    text = "".join(c for c in text if unicodedata.category(c) not in ("Mn", "Me", "Cf"))
    text = _EMPTY_LINK.sub("", text)
    for _ in range(4):  # nested links, a few deep: a link is shown as its text
        text = _LINK.sub(r"\1", text)
    text = " ".join(_MARKS.sub("", text).split())
    if any(_LEAD.search(text, max(0, m.start() - 20), m.start()) for m in _INTERVAL.finditer(text)):
        return [(paragraph[0][0], "a number in claimbench's format outside every marker region (as a reader sees the "
                                  "paragraph): only `claimbench publish` writes those, between its markers; remove it")]
    return []


def _outside_problems(line: str, outside: str, folder: str) -> list[str]:
    """What the text outside the marker regions (code spans blanked) shows otherwise than it says."""
    out = []
    if line.strip() not in _MAINTAINERS and _HTML.search(outside):
        out.append("raw HTML outside the markers (a tag or a comment): GitHub renders it and claimbench reads "
                   "it as text, so the two disagree on what the line shows; the list uses Markdown only")
    if _ENTITY.search(outside):
        out.append("an HTML entity outside the markers: GitHub shows the character it names, claimbench the "
                   "entity; write the character itself")
    if "![" in outside:
        out.append("an image outside the markers: it can show any number, and nothing reads what it shows; the list "
                   "is text")
    if "]:" in outside:
        out.append("a link reference definition, or text that reads as one: it can turn text a marker region "
                   "shows into a link; the list writes its links inline")
    # the line's paths as the reader's browser resolves them (a/./b, a//b and a/x/../b are a/b); normpath
    # splits the whole line on "/", which mangles the prose around them, but only the folder is looked for
    decoded = posixpath.normpath(unquote(html.unescape(outside))).casefold() + "/"
    if folder in decoded and folder not in outside.casefold():
        out.append(f"names {folder} outside the markers, encoded or through a dotted path: numbers and their "
                   "records are written only by claimbench publish; remove it")
    return out


def _invisible(c: str, before: str) -> bool:
    """Format characters (bidirectional controls, zero-width ones, a soft hyphen), other controls, line or
    paragraph separators, spaces other than the plain and the no-break one (a hair space reads as none),
    and a combining mark on a plain character (a grapheme joiner inside a number hides it from a search)."""
    if c in "\t\r":  # a carriage return has its own message
        return False
    cat = unicodedata.category(c)
    return cat in ("Cf", "Cc", "Zl", "Zp") or (cat == "Zs" and c not in _SPACES) or \
        (cat in ("Mn", "Me") and before.isascii())


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
