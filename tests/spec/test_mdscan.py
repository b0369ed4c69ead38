"""mdscan: the linear scanners give exactly what the backtracking regexes they replace gave."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from claimbench.spec.mdscan import atx_heading, link_targets, unlink

# the patterns as they were, quadratic on hostile lines but right on every line
OLD_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
OLD_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
OLD_TARGET = re.compile(r"\]\(([^)\s]+)\)")

lines = st.lists(st.sampled_from(["#", "##", " ", "\t", "x", "[", "]", "(", ")", "](", "\"", "<", ">",
                                  "é", "\u00a0", "a b", "results/records/r.json"]), max_size=24).map("".join)


@settings(max_examples=600, deadline=None)
@given(lines)
def test_same_answers_as_the_regexes(line):
    m = OLD_ATX.match(line)
    assert atx_heading(line) == (None if m is None else (len(m.group(1)), m.group(2) or ""))
    assert unlink(line) == OLD_LINK.sub(r"\1", line)
    assert [t for _, t in link_targets(line)] == OLD_TARGET.findall(line)
    assert set(link_targets(line)) <= set(link_targets(line, loose=True))


def test_examples():
    assert atx_heading("## Title ##  ") == (2, "Title")
    assert atx_heading("   # a #b") == (1, "a #b")
    assert atx_heading("## ###") == (2, "###")
    assert atx_heading("####### seven") is None and atx_heading("#nospace") is None
    assert unlink("see [A](x) and [B] (y) [C](z") == "see A and [B] (y) [C](z"
    assert link_targets("[r](a.json) [t](b.json \"t\") [u](c") == [(4, "a.json")]
    assert link_targets("[r](a.json) [t](b.json \"t\") [u](c", loose=True) == [(4, "a.json"), (16, "b.json"),
                                                                                (32, "c")]
