"""markers: the linear marker scans find what the lazy regexes they replace found."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claimbench.spec.markers import MarkerError, regions, strip_regions, tokens

# the patterns as they were: right on every line, quadratic on hostile ones
OLD_REGION = re.compile(r"<!--\s*claimbench:(.*?)\s*-->(.*?)<!--\s*/claimbench\s*-->")
OLD_TOKEN = re.compile(r"<!--\s*(/?)claimbench\b(.*?)-->")
OLD_START = re.compile(r"<!--\s*/?claimbench\b")

lines = st.lists(st.sampled_from(["<!--", "-->", " ", "\t", "claimbench", "claimbench:", "/", ":", "k",
                                  "x", "-", ">", "é", "\u00a0"]), max_size=20).map("".join)


@settings(max_examples=800, deadline=None)
@given(lines)
def test_same_regions_and_tokens_as_the_regexes(line):
    found = [(r.start, r.end, line[r.key[0]:r.key[1]].strip(), line[r.content[0]:r.content[1]])
             for r in regions(line)]
    assert found == [(m.start(), m.end(), m.group(1).strip(), m.group(2)) for m in OLD_REGION.finditer(line)]
    assert strip_regions(line) == OLD_REGION.sub("", line)
    old = [(bool(m.group(1)), m.group(2)) for m in OLD_TOKEN.finditer(line)]
    if len(old) == len(OLD_START.findall(line)):
        assert tokens(line) == old
    else:
        with pytest.raises(MarkerError, match="not closed"):
            tokens(line)


def test_the_word_in_another_case_is_refused():
    with pytest.raises(MarkerError, match="spelled 'ClaimBench'"):
        tokens("a <!-- ClaimBench:k -->1<!-- /ClaimBench -->")
    assert tokens("<!-- claimbenchmark -->") == [] and regions("<!-- ClaimBench:k -->1<!-- /claimbench -->") == []
