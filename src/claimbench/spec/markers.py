"""Find claimbench's marker comments in one line of the list, in time linear in the line.

Why: a published number lives in ``<!-- claimbench:KEY -->CONTENT<!-- /claimbench -->`` and
nowhere else, so the list reader must find these comments exactly, and it reads lines that come
from pull requests. Lazy regular expressions (``<!--\\s*claimbench:(.*?)\\s*-->(.*?)<!--...``)
rescan the rest of the line from every ``<!--`` that has no end, which is quadratic; these scans
use ``str.find`` and anchored matches, and resume after the point each failed attempt reached.
`listing` turns a `MarkerError` into a located `ListError`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_START = re.compile(r"<!--\s*(/?)(claimbench)\b", re.IGNORECASE)  # any case, to refuse the wrong one
_OPEN = re.compile(r"<!--\s*claimbench:")
_CLOSE = re.compile(r"<!--\s*/claimbench\s*-->")


class MarkerError(ValueError):
    """A marker comment that cannot be read; the message says how to write it."""


def tokens(masked: str) -> list[tuple[bool, str]]:
    """(is closing, text between 'claimbench' and '-->') of each marker comment, left to right.

    A marker comment is ``<!--``, blanks, an optional ``/``, then the word ``claimbench`` and
    everything up to the first ``-->``. One that no ``-->`` closes before the next marker opens
    is refused, and so is the word in any case but lower case: a look-alike that publish and
    audit skipped would hold a number nobody checks. Each ``<!--`` is looked at once.
    """
    out = []
    m = _comment(masked, _START, 0)
    while m is not None:
        if m.group(2) != "claimbench":
            raise MarkerError(f"marker comment spelled {m.group(2)!r}: claimbench markers are "
                              "lower case, '<!-- claimbench:KEY -->' and '<!-- /claimbench -->'; fix the "
                              "case, or remove the comment and let claimbench publish write the number")
        end = masked.find("-->", m.end())
        nxt = _comment(masked, _START, m.start() + 4)
        if end < 0 or (nxt is not None and nxt.start() < end):
            raise MarkerError("claimbench marker comment is not closed with '-->'")
        out.append((m.group(1) == "/", masked[m.end():end]))
        m = nxt
    return out


@dataclass(frozen=True)
class Region:
    start: int
    end: int
    key: tuple[int, int]  # the key, blanks around it included
    content: tuple[int, int]


def regions(s: str) -> list[Region]:
    """Each ``<!-- claimbench:KEY -->CONTENT<!-- /claimbench -->`` in ``s``, left to right.

    The key runs to the first ``-->``, the content to the first closing marker after it. An
    opening marker with no closing one after it ends the scan: none after it has one either.
    Each ``<!--`` is looked at at most twice, so this is linear in the line.
    """
    out = []
    m = _comment(s, _OPEN, 0)
    while m is not None:
        q = s.find("-->", m.end())
        c = _comment(s, _CLOSE, q + 3) if q >= 0 else None
        if c is None:
            break
        out.append(Region(m.start(), c.end(), (m.end(), q), (q + 3, c.start())))
        m = _comment(s, _OPEN, c.end())
    return out


def _comment(s: str, pattern: re.Pattern, pos: int) -> re.Match | None:
    """The first ``<!--`` at or after ``pos`` that ``pattern`` matches there; each is looked at once."""
    j = s.find("<!--", pos)
    while j >= 0:
        c = pattern.match(s, j)
        if c is not None:
            return c
        j = s.find("<!--", j + 4)
    return None


def first_region(s: str) -> Region | None:
    found = regions(s)
    return found[0] if found else None


def strip_regions(s: str) -> str:
    """``s`` without its marker regions: what the entry's own author wrote."""
    out, done = [], 0
    for r in regions(s):
        out.append(s[done:r.start])
        done = r.end
    return "".join(out) + s[done:]
