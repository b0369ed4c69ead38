"""Linear-time scanners for the inline Markdown shapes the list reader and audit look at.

Why: LIST.md comes from pull requests, and `check`, `publish` and `audit` parse it on every run.
The regular expressions these replace backtracked: a pattern tried at every start position that
scans to the end of the line from each one (`\\[([^\\]]*)\\]\\(` on a line of `[`) or a lazy
group followed by an optional tail (`(.*?)(?:[ \\t]+#+)?[ \\t]*$` on a run of spaces) costs time
quadratic in the line, and one 200 KB line held audit for minutes. Each function here returns
exactly what its regex did, but moves forward only: a failed attempt at one start proves that
every start up to the point it stopped at fails too, so the scan resumes there, and every
character is looked at a bounded number of times.
"""

from __future__ import annotations

import re

_HASHES = re.compile(r" {0,3}(#{1,6})(?=[ \t]|$)")
_STOP = re.compile(r"[)\s]")


def atx_heading(line: str) -> tuple[int, str] | None:
    """(level, raw title) of an ATX heading line, or None; the title keeps its inline Markdown.

    Same answers as ``^ {0,3}(#{1,6})(?:[ \\t]+(.*?))?(?:[ \\t]+#+)?[ \\t]*$``: the title is the
    text after the opening hashes and their blanks, less trailing blanks and a closing run of
    hashes that a blank separates from it.
    """
    m = _HASHES.match(line)
    if m is None:
        return None
    body = line[m.end():].lstrip(" \t").rstrip(" \t")
    bare = body.rstrip("#")
    if bare != body and bare[-1:] in (" ", "\t"):
        body = bare.rstrip(" \t")
    return len(m.group(1)), body


def unlink(s: str) -> str:
    """``s`` with each inline link ``[text](target)`` replaced by its text.

    Same answers as ``re.sub(r"\\[([^\\]]*)\\]\\([^)]*\\)", r"\\1", s)``. A ``[`` whose first
    ``]`` is not followed by ``(`` fails, and so does every ``[`` before that ``]``; with no
    ``]`` or no ``)`` left, nothing further can match.
    """
    out, done = [], 0
    i = s.find("[")
    while i >= 0:
        j = s.find("]", i + 1)
        if j < 0:
            break
        if not s.startswith("(", j + 1):
            i = s.find("[", j + 1)
            continue
        k = s.find(")", j + 2)
        if k < 0:
            break
        out += [s[done:i], s[i + 1:j]]
        done = k + 1
        i = s.find("[", done)
    return "".join(out) + s[done:]


def link_targets(s: str, *, loose: bool = False) -> list[tuple[int, str]]:
    """(offset, target) of each inline link target ``](target)`` in ``s``, left to right.

    Same answers as ``re.finditer(r"\\]\\(([^)\\s]+)\\)", s)``: the target is the run of
    characters after ``](`` up to the first ``)`` or blank, and must be closed by ``)``.
    ``loose`` also takes a run that a blank or the end of the line stops (``](url "title")``,
    ``](<path>``, a link left open), which is what a reader would still follow.
    """
    out = []
    i = s.find("](")
    while i >= 0:
        stop = _STOP.search(s, i + 2)
        end = stop.start() if stop else len(s)
        if end > i + 2 and (loose or (stop is not None and stop.group() == ")")):
            out.append((i + 2, s[i + 2:end]))
        i = s.find("](", max(end, i + 1))
    return out
