"""The one rule for text from a claim or a record that reaches LIST.md, a page or a terminal.

Claim names, hardware names, dtypes and file names are written by whoever wrote the claim or
the record, and they land next to other people's numbers. So every such string goes through
one of three renderings, all built on `plain`:

- `plain`: one line; whitespace runs become one space; every character that is invisible or
  moves other text (C0/C1 controls, ANSI escapes, bidi overrides and isolates, zero-width and
  other format characters, line and paragraph separators, private use, surrogates, unassigned
  code points) becomes U+FFFD, so a reader sees that something was there.
- `markdown`: `plain`, then Markdown and HTML metacharacters escaped, so a name can never open a
  link, an image, a code span, an HTML tag or a comment (a marker region in LIST.md is an HTML
  comment, and a backtick would hide it from the list parser), and never closes one either.
- `terminal`: like `plain`, but the spacing of a formatted line (columns, indents) is kept.

HTML pages escape `plain(text)` with their template engine's autoescaping.

`check` refuses what `plain` would have to change (`problem`), with the key and the line, so a
claim never reaches publish with text that renders differently from what its author sees.
Records are not refused for it: they are rendered with `plain`/`markdown` and stay readable.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from typing import Optional

REPLACEMENT = "\ufffd"
_BAD_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_WHITESPACE = frozenset("\t\n\r\f\v ")
_MD_ESCAPE = {  # what can open or close inline Markdown or HTML; parentheses too, so that an
    # escaped `\]` is never followed by `(` and read as a link by anything scanning for `](`
    "&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "&#96;",
    "\\": "\\\\", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]", "(": "\\(", ")": "\\)",
    "!": "\\!", "|": "\\|", "~": "\\~", "$": "\\$",
}
_MD_RE = re.compile("[" + re.escape("".join(_MD_ESCAPE)) + "]")
_SPACES = re.compile(r"\s+")
# printable, nothing to escape (single spaces, none at either end: `_nothing_to_do`); one character
# class repeated, which `re` matches without a backtracking entry per character (the alternation it
# replaces took about 120 bytes a character: 850 MB for a 6 MB machine name, an adversarial review)
_NOTHING_TO_DO = re.compile(r"[A-Za-z0-9.,:;/=+\-%@'\"?#{}^ ]*")
_ASCII_SAFE = re.compile(r"[ -~]*")  # printable ASCII: nothing to replace


def unsafe(ch: str) -> bool:
    """True for a character that is invisible, moves other text, or is not a character at all."""
    if ch in _WHITESPACE:
        return False
    return unicodedata.category(ch) in _BAD_CATEGORIES


def problem(text: str) -> Optional[str]:
    """Why `text` cannot be shown as written (the first bad character), or None."""
    if _ASCII_SAFE.fullmatch(text):
        return None
    for i, ch in enumerate(text):
        if ch in "\n\r\t\f\v":
            continue
        if unsafe(ch):
            name = unicodedata.name(ch, "a control or unassigned character")
            return (f"holds U+{ord(ch):04X} ({name}) at character {i + 1}: invisible or text-reordering "
                    "characters are not allowed; delete it")
    return None


def _clean(text: str) -> str:
    """Every unsafe character as U+FFFD, every line break and tab as a space; nothing else moves."""
    text = str(text)
    if _ASCII_SAFE.fullmatch(text):
        return text
    return "".join(" " if ch in _WHITESPACE else REPLACEMENT if unsafe(ch) else ch for ch in text)


@lru_cache(maxsize=4096)
def plain(text: str) -> str:
    """One line, whitespace collapsed, every unsafe character shown as U+FFFD."""
    return _SPACES.sub(" ", _clean(text)).strip()


def markdown(text: str) -> str:
    """`plain`, with Markdown and HTML metacharacters escaped: it reads as the text it is. GitHub's
    autolinks are broken too (`://`, `www.`, `@`): a bare URL in a name became a live link on the
    list, beside the number's own record link (an adversarial review, 2026-12-06)."""
    if _nothing_to_do(text) and not _AUTOLINK.search(text):  # most text: 100,000 record paths
        return text
    return _markdown(text)


def _nothing_to_do(text: str) -> bool:
    return _NOTHING_TO_DO.fullmatch(text) is not None and "  " not in text and not text.startswith(" ") \
        and not text.endswith(" ")


_AUTOLINK = re.compile(r"://|www\.|@", re.IGNORECASE)
_AUTOLINK_BREAK = {"://": "&#58;//", "@": "&#64;"}


@lru_cache(maxsize=4096)
def _markdown(text: str) -> str:
    escaped = _MD_RE.sub(lambda m: _MD_ESCAPE[m.group(0)], plain(text))
    return _AUTOLINK.sub(lambda m: _AUTOLINK_BREAK.get(m.group(0), m.group(0)[:3] + "&#46;"), escaped)


def terminal(text: str) -> str:
    """One line for a terminal: no escape sequence, no reordering, no line break; the spacing
    (a table's columns, an indent) is kept."""
    return _clean(text)
