"""The list's Markdown as safe HTML: the subset LIST.md uses, and nothing that could run.

Headings (with GitHub's anchor ids, so the list's own table of contents works), paragraphs,
block quotes, nested lists and fenced code; inline code, bold, and links whose target is http(s)
or an anchor on the page. Everything else, raw HTML included, is text: each piece goes through
`clean` (control and bidirectional-override characters become visible marks such as `[U+202E]`, so text
cannot reorder what a reader sees) and is escaped by markupsafe. A heading whose section holds
nothing is left out.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Callable, Optional

from markupsafe import Markup, escape

from claimbench.spec.listing import fence_closes, fence_opened

_BIDI = set("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Each construct spans a bounded stretch: an opener with no closer (a line of 20,000 `[` or `<!--`)
# made every lazy scan run to the line's end, and a 1.5 MB hostile list took 285 s to render (an
# adversarial review). A code span, link or bold text longer than these is shown as the text it is.
_CODE = re.compile(r"(`{1,16})[^\n]{1,500}?\1")
_INLINE = re.compile(r"(?P<code>`{1,16})(?P<ctext>[^\n]{1,500}?)(?P=code)|\[(?P<ltext>[^\[\]]{1,500})\]"
                     r"\((?P<url>(?:[^()\s]|\([^()\s]{0,200}\)){1,2000})\)|\*\*(?P<bold>[^\n]{1,500}?)\*\*")
_MARKER_OPEN = re.compile(r"<!--\s*claimbench:")
_MARKER_CLOSE = re.compile(r"<!--\s*/claimbench\s*-->")
_ITEM = re.compile(r"^(?P<indent>\s*)(?P<mark>[-*+]|\d{1,9}[.)])\s+(?P<body>.*)$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")


def clean(text) -> str:
    """Text without control or bidi-override characters; each one shows as its code point, e.g. `[U+202E]`."""
    s = str(text)
    if s.isprintable() and not (_BIDI & set(s)):
        return s
    return "".join(f"[U+{ord(c):04X}]" if c in _BIDI or (unicodedata.category(c) in ("Cc", "Cf") and c not in "\t\n")
                   else c for c in s)


def safe_url(url) -> Optional[str]:
    """The URL when it is http(s) with a host, else None (javascript:, data:, relative paths)."""
    u = clean(url).strip()
    return u if re.match(r"https?://[^/\s]+", u, re.I) and not re.search(r"[\s\"'<>`]", u) else None


def slug(text: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces as hyphens."""
    s = re.sub(r"[^\w\- ]", "", clean(text).strip().lower())
    return s.replace(" ", "-")


_MAINTAINERS = re.compile(r"<!--\s*maintainers\s*-->.*?<!--\s*/maintainers\s*-->", re.S)


def drop_maintainer_notes(text: str) -> str:
    """`text` without the regions between `<!-- maintainers -->` and `<!-- /maintainers -->`: notes
    for whoever edits the Markdown (how publish writes numbers) are not for the site's reader.
    Each region keeps its line breaks, so every line number after it still points where it did."""
    return _MAINTAINERS.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def uncomment(text: str) -> str:
    """`text` without HTML comments (and a published number's marker region, which the site
    shows from the records itself); comments shown inside code spans are text and stay."""
    masked = _CODE.sub(lambda m: "\0" * len(m.group(0)), text)
    out, pos = [], 0
    closes = True  # whether a closing marker may still follow: once a search finds none, none is searched again
    while (start := masked.find("<!--", pos)) >= 0:  # one pass: each comment's end is looked for once
        close = _MARKER_CLOSE.search(masked, start) if closes and _MARKER_OPEN.match(masked, start) else None
        closes = closes and (close is not None or not _MARKER_OPEN.match(masked, start))
        if close is not None:  # a marker region: its comments and the number between them
            end = close.end()
            while start > pos and masked[start - 1].isspace():
                start -= 1
        else:
            found = masked.find("-->", start + 4)
            if found < 0:  # no comment closes after this one, so none after it does either
                break
            end = found + 3
        out.append(text[pos:start])
        pos = end
    out.append(text[pos:])
    return "".join(out)


def inline(text: str, anchors: frozenset = frozenset()) -> Markup:
    """One line of Markdown as HTML; only http(s) links and known #anchors become links."""
    text = uncomment(text)
    out, pos = [], 0
    for m in _INLINE.finditer(text):
        out.append(escape(clean(text[pos:m.start()])))
        if m.group("code"):
            out.append(Markup("<code>{}</code>").format(clean(m.group("ctext"))))
        elif m.group("url"):
            url = m.group("url")
            target = url if url.startswith("#") and url[1:] in anchors else safe_url(url)
            label = inline(m.group("ltext"), anchors)
            out.append(Markup('<a href="{}">{}</a>').format(target, label) if target else label)
        else:
            out.append(Markup("<strong>{}</strong>").format(inline(m.group("bold"), anchors)))
        pos = m.end()
    out.append(escape(clean(text[pos:])))
    return Markup("").join(out)


@dataclass
class Heading:
    level: int
    text: str
    id: str
    keep: bool = False


@dataclass
class _Block:
    kind: str  # heading | para | quote | list | code
    lines: list = field(default_factory=list)
    heading: Optional[Heading] = None


def blocks(text: str, heading_lines: dict[int, tuple[int, str]]) -> list[_Block]:
    """Group the lines (1-based `heading_lines`: line -> (level, text), as the list parser found them)."""
    out: list[_Block] = []
    cur: Optional[_Block] = None
    fence = ""
    seen: dict[str, int] = {}
    for n, line in enumerate(text.split("\n"), start=1):
        if fence:  # closed as the list parser closes it (listing.fenced): the two never disagree on a line
            if fence_closes(line, fence):
                fence, cur = "", None
            else:
                assert cur is not None  # the code block the fence opened
                cur.lines.append(line)
            continue
        opened = fence_opened(line)
        if opened:
            fence, cur = opened, _Block("code")
            out.append(cur)
            continue
        if n in heading_lines:
            level, title = heading_lines[n]
            base = slug(title)
            k = seen.get(base, 0)
            seen[base] = k + 1
            out.append(_Block("heading", heading=Heading(level, title, base if k == 0 else f"{base}-{k}")))
            cur = None
            continue
        if not line.strip() or re.fullmatch(r"\s*(=+|-+)\s*", line) and out and out[-1].kind == "heading":
            cur = None
            continue
        kind = "quote" if line.lstrip().startswith(">") else "list" if _ITEM.match(line) else "para"
        if cur is not None and (cur.kind == kind or (cur.kind == "list" and kind == "para" and line[:1].isspace())):
            cur.lines.append((n, line))
            continue
        cur = _Block(kind, [(n, line)])
        out.append(cur)
    return out


def render(text: str, heading_lines: dict[int, tuple[int, str]], extras: Callable[[int], Markup],
           *, skip_first_heading: bool = True) -> tuple[list[Heading], Markup]:
    """(headings kept, the body as HTML). `extras(line)` adds what an entry line shows after its text."""
    bs = blocks(text, heading_lines)
    if skip_first_heading and bs and bs[0].kind == "heading":
        bs = bs[1:]
    _mark_kept(bs)
    anchors = frozenset(b.heading.id for b in bs if b.heading is not None and b.heading.keep)
    html = []
    for b in bs:
        if b.heading is not None:  # the heading blocks, and only they, carry one
            if b.heading.keep:
                h = min(6, max(2, b.heading.level))
                html.append(Markup('<h{0} id="{1}">{2}</h{0}>').format(h, b.heading.id, inline(b.heading.text, anchors)))
        elif b.kind == "code":
            html.append(Markup("<pre><code>{}</code></pre>").format(clean("\n".join(b.lines))))
        elif b.kind == "quote":
            body = " ".join(re.sub(r"^\s*>\s?", "", ln) for _, ln in b.lines)
            html.append(Markup("<blockquote><p>{}</p></blockquote>").format(inline(body, anchors)))
        elif b.kind == "para":
            html.append(Markup("<p>{}</p>").format(inline(" ".join(ln.strip() for _, ln in b.lines), anchors)))
        else:
            html.append(_list(b.lines, anchors, extras))
    return [b.heading for b in bs if b.heading is not None and b.heading.keep], Markup("\n").join(html)


def _mark_kept(bs: list[_Block]) -> None:
    """A heading stays when any block that is not a heading follows it before a heading at its
    level or above."""
    open_: list[Heading] = []
    for b in bs:
        if b.heading is not None:
            while open_ and open_[-1].level >= b.heading.level:
                open_.pop()
            open_.append(b.heading)
        else:
            for h in open_:
                h.keep = True


def _list(lines: list, anchors: frozenset, extras: Callable[[int], Markup]) -> Markup:
    """Nested <ul>/<ol> by indentation; continuation lines join the item above them."""
    items: list[list] = []  # [indent, ordered, line number, text]
    for n, line in lines:
        m = _ITEM.match(line)
        if m:
            items.append([len(m.group("indent").expandtabs(4)), m.group("mark")[0].isdigit(), n, m.group("body")])
        elif items:
            items[-1][3] += " " + line.strip()
    out: list = []
    stack: list[tuple[int, str]] = []
    for indent, ordered, n, body in items:
        while stack and indent < stack[-1][0]:
            out.append(Markup(f"</li></{stack.pop()[1]}>"))
        if stack and indent == stack[-1][0]:
            out.append(Markup("</li>"))
        if not stack or indent > stack[-1][0]:
            tag = "ol" if ordered else "ul"
            stack.append((indent, tag))
            out.append(Markup(f"<{tag}>"))
        out.append(Markup("<li>{}{}").format(inline(body, anchors), extras(n)))
    while stack:
        out.append(Markup(f"</li></{stack.pop()[1]}>"))
    return Markup("").join(out)
