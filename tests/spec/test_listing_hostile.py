"""The list reader takes time linear in the list, whatever one line holds.

Why: LIST.md comes from pull requests and `check`, `publish` and `audit` parse it on every run;
regexes that backtracked made one 200 KB line cost minutes (a run of spaces against `\\s+[-–—]`,
unclosed `<!-- claimbench` openers against a lazy `(.*?)-->`).

The argument, with no clock in it: every pattern `parse_list`, `read_region`, `render_line` and
`links_outside_regions` still run is either anchored at the start of the line (`_ITEM`, `_FENCE`,
`_SETEXT`, `_LINKED`, `_BOLD`, `_REFDEF`: one attempt, each quantifier over a character class
its successor cannot match, so a failed attempt backs off in one pass), or can start a match
only where no earlier attempt scanned (`_SEP` only at the start of a blank run; `_CODE` from a
backtick ends at the next backtick, so only the last run of them can fail, once). Markers, links and ATX headings are scanned with `str.find`
(`markers`, `mdscan`): a failed attempt at one `<!--`, `[` or `](` proves every start up to where
it stopped fails as well, so the scan resumes there, and each character is read a bounded
number of times. The timings below only guard that argument: each line is 500 KB, and the bound
(5 s a parse, on a slow shared machine) is hundreds of times what a linear parse takes, while the
quadratic parser took minutes. Each payload runs in a child process so that a regression fails
the test after a minute instead of hanging the suite.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import claimbench

SIZE = 500_000
BOUND_S = 5.0
PAYLOADS = {
    "spaces": "' ' * N",
    "openers": "'<!-- claimbench' * (N // 15)",
    "bars": "'|' * N",
    "hashes": "'#' * N",
    "brackets": "'[' * N",
    "link openers": "'](' * (N // 2)",
    "comments and backticks": "'<!--`' * (N // 5)",
    "a region of blanks": "'<!-- claimbench:k -->' + ' ' * N",
}
CHILD = textwrap.dedent("""
    import json, sys, time
    from claimbench.spec.listing import ListError, links_outside_regions, parse_list, read_region, render_line
    N = {size}
    payload = {payload}
    slowest = 0.0
    for shape in ("- x{{}}y", "- x - {{}}", "## {{}} ##", "{{}}", "- A - a <!-- claimbench:k -->{{}}<!-- /claimbench -->"):
        for head, tail in (("## S\\n\\n", "\\n"), ("Title\\n\\n", "\\n\\nOther\\n")):
            text = head + shape.format(payload) + tail
            start = time.perf_counter()
            try:
                for entry in parse_list(text).entries:
                    read_region(entry)
                    render_line(entry.text, "1x", "k")
            except ListError:
                pass
            links_outside_regions(text)
            slowest = max(slowest, time.perf_counter() - start)
    print(json.dumps(slowest))
""")


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_a_hostile_line_of_500_kb_parses_in_linear_time(name):
    code = CHILD.format(size=SIZE, payload=PAYLOADS[name])
    src = str(Path(claimbench.__file__).resolve().parents[1])
    try:
        done = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {src!r})\n{code}"],
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail(f"parsing a {SIZE // 1000} KB line of {name} ran past 60 s: a scan is quadratic again")
    assert done.returncode == 0, done.stderr
    slowest = json.loads(done.stdout)
    assert slowest < BOUND_S, f"{name}: {slowest:.1f} s for one {SIZE // 1000} KB line"
