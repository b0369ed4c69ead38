"""Read a Markdown reading list into sections and entries, and write numbers between markers.

Why: a claim names a list entry (`Name`, or `Section > Name` when the name is in two sections),
and `publish` writes the verified number onto that entry's line. The same code must read the
project's LIST.md and the upstream README, so it accepts the shapes both use: ATX/setext headings
or, in a file with no Markdown headings at all, isolated plain-text lines as headings; `-`, `*`,
`+`, `•` and numbered items whose name comes first, before a ` - `, ` – ` or ` — ` separator.

A published number lives in one region at the end of its entry's line:
``<!-- claimbench:KEY -->CONTENT<!-- /claimbench -->``. One line per region keeps rewriting
mechanical and idempotent; anything malformed is a `ListError` and the caller writes nothing.
Standard library only: `check` and `audit` parse the list on every run.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from functools import cached_property

from claimbench.errors import UserError
from claimbench.spec.markers import MarkerError, first_region, strip_regions, tokens
from claimbench.spec.mdscan import atx_heading, link_targets, unlink

# Every pattern here is anchored or cannot backtrack over what an earlier start already scanned
# (each is linear on any line); the shapes a regex could only match in quadratic time are
# scanned with str.find in `mdscan` and `markers`.
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_ITEM = re.compile(r"^([ \t]*)([-*+•]|\d{1,9}[.)])[ \t]+(.*)$")
_LINKED = re.compile(r"^(\*\*|__)?\[([^\]]+)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)(\*\*|__)?")
_BOLD = re.compile(r"^(\*\*|__)(.+?)\1")
_SEP = re.compile(r"(?<!\s)\s+[-–—]\s+")  # starts only where a blank run starts: one try per run
_CODE = re.compile(r"`+[^`]*`+")
_REFDEF = re.compile(r" {0,3}\[[^\]]+\]:[ \t]*<?([^\s>]+)")
_TOC_NAMES = {"contents", "table of contents", "toc"}


class ListError(UserError):
    """The list cannot be read or written safely; `publish` must leave it untouched."""

    def __init__(self, path: str, line: int, message: str):
        super().__init__(f"{path}:{line}: {message}")
        self.path, self.line = path, line


class EntryNotFound(UserError):
    """A claim's `entry` names nothing in the list; `suggestions` holds the nearest refs."""

    def __init__(self, ref: str, suggestions: list[str]):
        hint = f"; did you mean {', '.join(repr(s) for s in suggestions)}?" if suggestions else ""
        super().__init__(f"no list entry named {ref!r}{hint}")
        self.ref, self.suggestions = ref, suggestions


class AmbiguousEntry(UserError):
    """A bare name found in several sections; `candidates` are the `Section > Name` refs to use."""

    def __init__(self, ref: str, candidates: list[str]):
        super().__init__(f"list entry {ref!r} is ambiguous; write one of: "
                         + ", ".join(repr(c) for c in candidates))
        self.ref, self.candidates = ref, candidates


@dataclass(frozen=True)
class Heading:
    line: int
    level: int
    text: str


@dataclass(frozen=True)
class Entry:
    """One list item whose name comes first. `text` is the whole source line, region included."""

    section: str
    name: str
    line: int
    text: str
    path: tuple[str, ...] = ()  # heading texts from the top; path[-1] == section

    @property
    def key(self) -> str:
        return f"{self.section} > {self.name}" if self.section else self.name


@dataclass(frozen=True)
class Listing:
    path: str
    entries: tuple[Entry, ...]
    headings: tuple[Heading, ...] = ()

    def names(self) -> list[str]:
        return list(dict.fromkeys(e.name for e in self.entries))

    def entry_at(self, line: int) -> Entry | None:
        return self._by_line.get(line)

    @cached_property
    def _by_line(self) -> dict[int, Entry]:
        return {e.line: e for e in self.entries}

    def find(self, ref: str) -> Entry:
        """Resolve a claim's `entry`: a unique name, or `Section > Name` (section or heading path)."""
        want = _norm(ref)
        for fold in (lambda s: s, str.casefold):
            hits = self._match(want, fold)
            if len(hits) == 1:
                return hits[0]
            if hits:
                raise AmbiguousEntry(ref, [self._ref(e) for e in hits])
        raise EntryNotFound(ref, self._suggest(want))

    @cached_property
    def _by_name(self) -> dict:
        """Entries by exact and by case-folded name: `find` runs once or twice per claim."""
        index: dict = {}
        for e in self.entries:
            index.setdefault(("exact", e.name), []).append(e)
            index.setdefault(("fold", e.name.casefold()), []).append(e)
        return index

    def _named(self, name: str, fold) -> list[Entry]:
        kind = "exact" if fold("A") == "A" else "fold"
        return self._by_name.get((kind, fold(name)), [])

    def _match(self, want: str, fold) -> list[Entry]:
        hits = []
        if " > " in want:
            sec, _, name = want.rpartition(" > ")
            parts = tuple(fold(p.strip()) for p in sec.split(" > "))
            hits = [e for e in self._named(name, fold)
                    if tuple(fold(p) for p in e.path[-len(parts):]) == parts]
        return hits or list(self._named(want, fold))

    def _ref(self, entry: Entry) -> str:
        """`Section > Name` when that is unique in the list, else the full heading path."""
        if sum(e.key == entry.key for e in self.entries) == 1:
            return entry.key
        return " > ".join(entry.path + (entry.name,))

    def _suggest(self, want: str) -> list[str]:
        name = want.rpartition(" > ")[2]
        by_fold: dict[str, list[Entry]] = {}
        for e in self.entries:
            by_fold.setdefault(e.name.casefold(), []).append(e)
        # names holding every word asked for ("roofline insightful"), then names spelled alike
        words = re.findall(r"\w+", name.casefold())
        worded = [n for n in by_fold if words and all(any(w.startswith(x) for w in re.findall(r"\w+", n)) for x in words)]
        out: list[str] = []
        for close in [*worded[:3], *difflib.get_close_matches(name.casefold(), list(by_fold), n=3, cutoff=0.6)]:
            group = by_fold[close]
            for ref in [group[0].name] if len(group) == 1 else [self._ref(e) for e in group]:
                if ref not in out:
                    out.append(ref)
        return out[:5]


def parse_list(text: str, path: str = "LIST.md") -> Listing:
    """Parse the list; raise `ListError` on a name repeated within a section or a bad marker."""
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    code = fenced(lines)
    heads, underlines = _markdown_headings(lines, code)
    if not heads:
        heads = _plain_headings(lines, code)
    stack: list[tuple[int, str]] = []
    sid, in_toc = -1, False
    items: list[tuple[int, int, str, int, bool, tuple[str, ...]]] = []
    headings = []
    for i, line in enumerate(lines):
        if code[i] or i in underlines:
            continue
        if i in heads:
            level, title = heads[i]
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            headings.append(Heading(i + 1, level, title))
            sid += 1
            in_toc = title.rstrip(":").strip().casefold() in _TOC_NAMES
            continue
        m = _ITEM.match(line)
        if m:
            indent = len(m.group(1).expandtabs(4))
            items.append((i, indent, m.group(3), sid, in_toc, tuple(t for _, t in stack)))
    top: dict[int, int] = {}
    for _, indent, _, s, _, _ in items:
        top[s] = min(indent, top.get(s, indent))
    entries: list[Entry] = []
    seen: dict[tuple, int] = {}
    for i, indent, body, s, toc, hpath in items:
        if toc or indent != top[s]:
            continue
        name = _entry_name(strip_regions(body))
        if name is None:
            continue
        entry = Entry(hpath[-1] if hpath else "", name, i + 1, lines[i], hpath)
        first = seen.setdefault((hpath, name), entry.line)
        if first != entry.line:
            raise ListError(path, entry.line, f"entry {name!r} appears twice in section "
                            f"{entry.section!r} (lines {first} and {entry.line}); rename or remove one")
        entries.append(entry)
    entry_lines = {e.line for e in entries}
    for i, line in enumerate(lines):
        if not code[i] and _check_markers(line, path, i + 1) and i + 1 not in entry_lines:
            raise ListError(path, i + 1, "claimbench marker region on a line that is not a list entry")
    return Listing(path, tuple(entries), tuple(headings))


def read_region(entry: Entry) -> tuple[str, str] | None:
    """The (key, content) of the entry line's marker region, or None when it has none."""
    r = first_region(blank_code(entry.text))
    if r is None:
        return None
    return entry.text[r.key[0]:r.key[1]].strip(), entry.text[r.content[0]:r.content[1]]


def render_line(entry_line: str, content: str | None, key: str) -> str:
    """Insert, replace (content) or remove (None) the region at the end of one entry line.

    Text outside the markers is kept byte for byte; inserting adds one space before the region,
    removing takes that one space away again, so insert-then-remove restores the line.
    """
    body = entry_line.rstrip("\r\n")
    ending = entry_line[len(body):]
    if not key or "-->" in key or "\n" in key or "\r" in key:
        raise ValueError(f"bad marker key {key!r}: must be non-empty, one line, without '-->'")
    if content is not None and any(bad in content for bad in ("\r", "\n", "`", "<!--", "-->")):
        raise ValueError(f"bad marker content {content!r}: one line, no backticks or comments")
    _check_markers(body, "<line>", 1)
    region = None if content is None else f"<!-- claimbench:{key} -->{content}<!-- /claimbench -->"
    m = first_region(blank_code(body))
    if m is None:
        return entry_line if region is None else f"{body} {region}{ending}"
    if region is not None:
        return body[:m.start] + region + body[m.end:] + ending
    start = m.start - 1 if m.start and body[m.start - 1] == " " else m.start
    return body[:start] + body[m.end:] + ending


def apply(text: str, updates: dict[int, tuple[str, str | None]], path: str = "LIST.md") -> str:
    """Return `text` with each updated entry line (1-based) re-rendered; all else is unchanged.

    The list is parsed first, so a malformed list or a line that is not an entry raises
    `ListError` before anything is produced.
    """
    listing = parse_list(text, path)
    lines = text.split("\n")
    for line, (key, content) in sorted(updates.items()):
        if listing.entry_at(line) is None:
            raise ListError(path, line, "not a list entry line; numbers go only on entry lines")
        lines[line - 1] = render_line(lines[line - 1], content, key)
    return "\n".join(lines)


def links_outside_regions(text: str) -> list[tuple[int, str]]:
    """(line, target) of every link the list shows outside its marker regions.

    Why: publish writes numbers only between markers, and audit compares each region with what
    publish would write; a number with its record link written anywhere else (a continuation
    line, the description) would read as verified while nothing checks it, so audit needs every
    link outside the regions to look at. Inline links are read loosely (a title or an unclosed
    link still counts) and reference definitions (``[r]: target``) count too; code spans and
    fenced code are text, not links.
    """
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    out = []
    for i, (line, code) in enumerate(zip(lines, fenced(lines))):
        if code or ("](" not in line and "]:" not in line):
            continue
        shown = strip_regions(blank_code(line))
        ref = _REFDEF.match(shown)
        out += [(i + 1, target) for _, target in link_targets(shown, loose=True)]
        out += [(i + 1, ref.group(1))] if ref else []
    return out


def mentions_outside_regions(text: str, needle: str) -> list[int]:
    """Lines where ``needle`` appears (any case) outside the marker regions, code spans and fenced code.

    Why: `links_outside_regions` reads Markdown links, but GitHub also renders a raw HTML link
    (`<a href=...>`), an autolink (`<https://...>`) and a bare URL as links; a mention of the records
    folder in any of them, or in plain text, outside the regions is a number nobody checks."""
    lines = [ln[:-1] if ln.endswith("\r") else ln for ln in text.split("\n")]
    folded = needle.casefold()
    return [i + 1 for i, (line, code) in enumerate(zip(lines, fenced(lines)))
            if not code and folded in line.casefold() and folded in strip_regions(blank_code(line)).casefold()]


def _norm(s: str) -> str:
    return " ".join(s.split())


def _clean(s: str) -> str:
    if "[" in s:
        s = unlink(s)
    return _norm(s.replace("**", "").replace("__", "") if "*" in s or "_" in s else s)


def _entry_name(body: str) -> str | None:
    """The name of an item whose name comes first, or None for prose and TOC items."""
    body = body.strip()
    lead = _LINKED.match(body) or _BOLD.match(body)
    if lead:
        rest = body[lead.end():]
        if lead.re is _LINKED and not rest.strip():
            return None if lead.group(3).startswith("#") else _clean(lead.group(2)) or None
        if _SEP.match(rest):
            return _clean(lead.group(2)) or None
    sep = _SEP.search(body)
    return (_clean(body[:sep.start()]) or None) if sep else None


def fenced(lines: list[str]) -> list[bool]:
    """Whether each line is in a fenced code block (the fences included), by CommonMark's rules for a
    fence at the top level: 0-3 spaces, three or more of one character, a backtick fence's info string
    holding no backtick (CommonMark's rule: such a line is text, and an adversarial review hid the
    entries after it from every check), closed by a run of the same character at least as long."""
    return _fences(lines)[0]


def unclosed_fence(lines: list[str]) -> int | None:
    """The line (1-based) of a fence that never closes, or None: GitHub ends such a block with its
    container (a list item), claimbench at the end of the list, so the two disagree on every line after."""
    return _fences(lines)[1]


def fence_opened(line: str) -> str:
    """The fence ``line`` opens at the top level ("" when none): 0-3 spaces, three or more of one
    character; a backtick fence's info string holds no backtick (CommonMark). The site reads fences
    by these two rules too (report/sitemd.py), so the two never disagree on which lines are code."""
    m = _FENCE.match(line) if "`" in line or "~" in line else None
    if m is None or (m.group(1)[0] == "`" and "`" in line[m.end():]):
        return ""
    return m.group(1)


def fence_closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes ``fence``: a run of its character at least as long, nothing after it."""
    m = _FENCE.match(line) if fence[0] in line else None
    return bool(m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line[m.end():].strip())


def _fences(lines: list[str]) -> tuple[list[bool], int | None]:
    out, fence, opened = [], "", None
    for n, line in enumerate(lines, start=1):
        if fence:
            out.append(True)
            if fence_closes(line, fence):
                fence, opened = "", None
        else:
            fence = fence_opened(line)
            out.append(bool(fence))
            opened = n if fence else None
    return out, opened


def _markdown_headings(lines, code) -> tuple[dict[int, tuple[int, str]], set[int]]:
    heads, underlines = {}, set()
    for i, line in enumerate(lines):
        if code[i] or i in underlines:
            continue
        atx = atx_heading(line) if "#" in line else None
        if atx:
            heads[i] = (atx[0], _clean(atx[1]))
        elif (i + 1 < len(lines) and lines[i + 1][:4].lstrip(" ")[:1] in ("=", "-")
              and not code[i + 1] and line.strip() and not _ITEM.match(line)
              and len(line) - len(line.lstrip(" ")) < 4 and _SETEXT.match(lines[i + 1])
              and (i == 0 or not _ITEM.match(lines[i - 1]))):
            heads[i] = (1 if lines[i + 1].strip()[0] == "=" else 2, _clean(line))
            underlines.add(i + 1)
    return heads, underlines


def _plain_headings(lines, code) -> dict[int, tuple[int, str]]:
    """Headings of a list without Markdown ones: short isolated lines that are not sentences.

    Levels come from the table of contents where there is one (its indentation), else flat.
    """
    n, found = len(lines), []
    for i, line in enumerate(lines):
        s = line.strip()
        m = _ITEM.match(line)
        if (code[i] or not s or len(s) > 100 or s[-1] in ".,;:!?" or s[0] in "<|>"
                or (i and lines[i - 1].strip()) or (i + 1 < n and lines[i + 1].strip())
                or (m and (not m.group(2)[0].isdigit() or _SEP.search(m.group(3))))):
            continue
        found.append(i)
    toc_rank: dict[str, int] = {}
    toc = next((i for i in found if lines[i].strip().rstrip(":").casefold() in _TOC_NAMES), None)
    if toc is not None:
        after = [i for i in found if i > toc]
        end = after[0] if after else n
        toc_items = [m for m in (_ITEM.match(x) for x in lines[toc + 1:end]) if m]
        indents = sorted({len(m.group(1).expandtabs(4)) for m in toc_items})
        for m in toc_items:
            toc_rank.setdefault(_clean(m.group(3)), indents.index(len(m.group(1).expandtabs(4))))
    titles = [_clean(lines[i]) for i in found]
    return {i: (1 if not toc_rank or (k == 0 and t not in toc_rank) else 2 + toc_rank.get(t, 0), t)
            for k, (i, t) in enumerate(zip(found, titles))}


def blank_code(line: str) -> str:
    """The line with inline code spans masked (same length), so markers shown in code are text."""
    return _CODE.sub(lambda m: "\0" * len(m.group(0)), line)


def _check_markers(line: str, path: str, lineno: int) -> bool:
    """Validate a line's markers; True when it holds one well-formed region."""
    if "<!--" not in line:
        return False
    is_open, regions = False, 0
    try:
        found = tokens(blank_code(line))
    except MarkerError as e:
        raise ListError(path, lineno, str(e)) from None
    for closing, rest in found:
        if closing:
            if not is_open:
                raise ListError(path, lineno, "stray '<!-- /claimbench -->' without an opening marker")
            if rest.strip():
                raise ListError(path, lineno, "closing marker must read '<!-- /claimbench -->', "
                                f"with nothing after '/claimbench' (it has {_shown(rest)})")
            is_open, regions = False, regions + 1
        elif is_open:
            raise ListError(path, lineno, "nested claimbench marker regions")
        elif not rest.startswith(":"):
            raise ListError(path, lineno, "opening marker must read '<!-- claimbench:KEY -->'")
        else:
            is_open = True
    if is_open:
        raise ListError(path, lineno, "unclosed claimbench marker region (close it on the same line)")
    if regions > 1:
        raise ListError(path, lineno, "more than one claimbench marker region on one line")
    return regions == 1


def _shown(s: str, limit: int = 60) -> str:
    return repr(s if len(s) <= limit else s[:limit] + "…")
