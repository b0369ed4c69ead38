"""Tests for claimbench.spec.listing: entries, sections, lookup, and marker regions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from claimbench.errors import UserError
from claimbench.spec.listing import (
    AmbiguousEntry,
    Entry,
    EntryNotFound,
    ListError,
    apply,
    links_outside_regions,
    parse_list,
    read_region,
    render_line,
)

ROOT = Path(__file__).resolve().parents[2]
LIST_MD = ROOT / "LIST.md"
UPSTREAM = Path(os.environ.get("CLAIMBENCH_UPSTREAM_LIST") or "/nonexistent")  # a copy of the upstream list, if you have one
SHAPE = Path(__file__).resolve().parents[1] / "fixtures" / "lists" / "upstream_shape.md"

SMALL = """# Title

## Contents

- [A](#a)
  - [B](#b)

## A

Prose mentioning Stream-K - not an entry, because it is a paragraph.

- Stream-K - Work-centric GEMM.
- [DeepGEMM](https://example.com/deepgemm) - FP8 GEMM.
  - Nested - not an entry.
- A bullet without a separator is prose.

### B

- Blackwell Tuning Guide - first.
- Foo - upper.
- foo - lower.

## C

- Blackwell Tuning Guide - second.
"""


@pytest.fixture(scope="module")
def listing():
    return parse_list(LIST_MD.read_text(encoding="utf-8"), "LIST.md")


@pytest.fixture(scope="module")
def small():
    return parse_list(SMALL, "small.md")


def _lines(text: str, start: str, stop: str) -> range:
    lines = text.split("\n")
    a = next(i for i, x in enumerate(lines) if x.startswith(start))
    b = next(i for i, x in enumerate(lines) if i > a and x.startswith(stop))
    return range(a + 1, b + 1)


# --- LIST.md --------------------------------------------------------------------------------

def test_list_md_has_the_reading_list_entries(listing):
    assert len(listing.entries) > 100
    keys = {e.key for e in listing.entries}
    for key in ("Matrix multiplication > Stream-K",
                "Foundational kernel exercises > Online Normalizer Calculation for Softmax",
                "Start here: the minimum mental model > Roofline: An Insightful Visual Performance Model",
                "Attention > FlashAttention-3",
                "Scheduling and continuous batching > vLLM, SGLang, and TensorRT-LLM",
                "AI-generated kernels > KernelGuard"):
        assert key in keys
    assert listing.find("Stream-K").path == ("AI Performance Engineering", "2. Kernel optimization",
                                             "Matrix multiplication")


def test_list_md_blackwell_tuning_guide_twice(listing):
    hits = [e for e in listing.entries if e.name == "Blackwell Tuning Guide"]
    assert [e.section for e in hits] == ["Programming model", "NVIDIA"]
    assert listing.find("Programming model > Blackwell Tuning Guide") == hits[0]
    assert listing.find("NVIDIA > Blackwell Tuning Guide") == hits[1]
    assert len(listing.names()) == len(listing.entries) - 2  # Blackwell Tuning Guide, Etalon


def test_list_md_contents_watchlist_and_policy_are_not_entries(listing):
    text = LIST_MD.read_text(encoding="utf-8")
    toc = _lines(text, "## Contents", "## Start here")
    assert not [e for e in listing.entries if e.line in toc]
    assert "Contents" in [h.text for h in listing.headings]
    sections = {e.section for e in listing.entries}
    assert not sections & {"Contents", "Watchlist", "Source policy", "Frontier", "AI Performance Engineering"}
    # the preamble shows marker syntax inside code spans: that is text, not a region
    assert "<!-- claimbench:" in text[:1000]


def test_list_md_matches_the_upstream_list(listing):
    if not UPSTREAM.exists():
        pytest.skip("set CLAIMBENCH_UPSTREAM_LIST to a copy of the upstream reading list")
    upstream = parse_list(UPSTREAM.read_text(encoding="utf-8"), str(UPSTREAM))
    assert {(e.path, e.name) for e in upstream.entries} == {(e.path, e.name) for e in listing.entries}
    ours = {e.name: e.text for e in listing.entries}
    theirs = {e.name: e.text for e in upstream.entries}
    # descriptions are the project's own words
    assert sum(ours[n].split(" - ", 1)[1] == theirs[n].split(" - ", 1)[1] for n in ours) == 0


# --- the upstream (plain-text) shape --------------------------------------------------------

def test_plain_text_shape_fixture():
    lst = parse_list(SHAPE.read_text(encoding="utf-8"), SHAPE.name)
    assert [e.key for e in lst.entries] == [
        "Start here: the minimum mental model > Attention Is All You Need",
        "Start here: the minimum mental model > Roofline: An Insightful Visual Performance Model",
        "Programming model > CUDA Programming Guide",
        "Programming model > Blackwell Tuning Guide",
        "Matrix multiplication > Stream-K",
        "Matrix multiplication > DeepGEMM",
        "NVIDIA > Blackwell Tuning Guide",
    ]
    assert lst.find("Stream-K").path == ("AI Performance Engineering", "2. Kernel optimization",
                                         "Matrix multiplication")
    assert lst.find("1. GPU fundamentals > Programming model > Blackwell Tuning Guide").line == 32
    levels = {h.text: h.level for h in lst.headings}
    assert levels["AI Performance Engineering"] == 1
    assert levels["6. Current hardware"] == 2 and levels["NVIDIA"] == 3
    assert "Read these first." not in levels and "For practice, see the lectures." not in levels


def test_plain_text_headings_need_isolation_and_no_full_stop():
    text = "Title\n\nSection\n\n• A - a.\n• B - b.\nnot isolated\n\nA sentence.\n\n• C - c.\n"
    lst = parse_list(text)
    assert [e.key for e in lst.entries] == ["Section > A", "Section > B", "Section > C"]


# --- entry shapes ---------------------------------------------------------------------------

@pytest.mark.parametrize("line, name", [
    ("- Stream-K - Work-centric GEMM.", "Stream-K"),
    ("* Stream-K - Work-centric GEMM.", "Stream-K"),
    ("+ Stream-K - Work-centric GEMM.", "Stream-K"),
    ("- [Stream-K](https://arxiv.org/abs/2301.03598) - Work-centric GEMM.", "Stream-K"),
    ("• Stream-K - Work-centric GEMM.", "Stream-K"),
    ("- **Stream-K** - Work-centric GEMM.", "Stream-K"),
    ("- **[Stream-K](https://x.org)** – en dash.", "Stream-K"),
    ("- Stream-K — em dash.", "Stream-K"),
    ("5. Roofline: An Insightful Visual Performance Model - The model.",
     "Roofline: An Insightful Visual Performance Model"),
    ("12) Roofline: An Insightful Visual Performance Model - The model.",
     "Roofline: An Insightful Visual Performance Model"),
    ("- [A - B](https://x.org) - a name with a dash inside its link", "A - B"),
    ("- [Stream-K](https://x.org)", "Stream-K"),
    ("- vLLM,   SGLang, and TensorRT-LLM - spaces normalized", "vLLM, SGLang, and TensorRT-LLM"),
    ("- Stream-K - desc <!-- claimbench:k -->1.5× - H200<!-- /claimbench -->", "Stream-K"),
])
def test_entry_shapes(line, name):
    lst = parse_list(f"## Sec\n\n{line}\n")
    assert [(e.section, e.name, e.line, e.text) for e in lst.entries] == [("Sec", name, 3, line)]
    assert lst.entries[0].key == f"Sec > {name}"


@pytest.mark.parametrize("line", [
    "- [Intro](#intro)",
    "- a bullet of prose without a separator",
    "- the paper that introduced the mechanism;",
    "Stream-K - a paragraph, not a list item",
    "-Stream-K - no space after the marker",
    "- - empty name",
])
def test_not_entries(line):
    assert parse_list(f"## Sec\n\n{line}\n").entries == ()


def test_small_list_sections_nesting_and_toc(small):
    assert [e.key for e in small.entries] == [
        "A > Stream-K", "A > DeepGEMM", "B > Blackwell Tuning Guide", "B > Foo", "B > foo",
        "C > Blackwell Tuning Guide"]
    assert small.find("B > Foo").path == ("Title", "A", "B")
    assert small.names() == ["Stream-K", "DeepGEMM", "Blackwell Tuning Guide", "Foo", "foo"]
    assert small.entry_at(13).name == "DeepGEMM" and small.entry_at(14) is None


def test_indented_list_counts_at_its_own_top_level():
    lst = parse_list("## S\n\n  - A - a\n    - B - nested\n  - C - c\n")
    assert [e.name for e in lst.entries] == ["A", "C"]


def test_setext_headings():
    lst = parse_list("Top\n===\n\nSub\n---\n\n- A - a\n")
    assert lst.entries[0].path == ("Top", "Sub")


def test_fenced_code_is_ignored():
    text = ("## Real\n\n```markdown\n## Fake\n- Stream-K - inside a fence\n"
            "- Bad <!-- claimbench:x -->\n```\n~~~~\n- Other - also fenced\n```\n~~~~\n\n- Real - yes\n")
    lst = parse_list(text)
    assert [(e.section, e.name) for e in lst.entries] == [("Real", "Real")]
    assert [h.text for h in lst.headings] == ["Real"]


# --- lookup ---------------------------------------------------------------------------------

def test_find_exact_whitespace_and_case_fallback(small):
    assert small.find("  Stream-K ").line == 12
    assert small.find("stream-k").name == "Stream-K"  # unique case-insensitive match
    assert small.find("Foo").line == 20               # exact match wins over case-folding
    assert small.find("a > deepgemm").name == "DeepGEMM"
    assert small.find("Title > A > B > Blackwell Tuning Guide").section == "B"
    assert small.find("A > B > Blackwell Tuning Guide").section == "B"


def test_find_ambiguous(small):
    with pytest.raises(AmbiguousEntry) as err:
        small.find("Blackwell Tuning Guide")
    assert err.value.candidates == ["B > Blackwell Tuning Guide", "C > Blackwell Tuning Guide"]
    assert "B > Blackwell Tuning Guide" in str(err.value)
    with pytest.raises(AmbiguousEntry) as err:
        small.find("FOO")
    assert err.value.candidates == ["B > Foo", "B > foo"]


def test_ambiguous_refs_fall_back_to_full_path():
    lst = parse_list("# X\n\n## N\n\n- A - 1\n\n# Y\n\n## N\n\n- A - 2\n")
    with pytest.raises(AmbiguousEntry) as err:
        lst.find("N > A")
    assert err.value.candidates == ["X > N > A", "Y > N > A"]
    assert lst.find("Y > N > A").line == 11


def test_find_not_found_suggests(small):
    with pytest.raises(EntryNotFound) as err:
        small.find("Stream K")
    assert err.value.suggestions == ["Stream-K"]
    with pytest.raises(EntryNotFound) as err:
        small.find("Blackwell Tuning Guid")
    assert err.value.suggestions == ["B > Blackwell Tuning Guide", "C > Blackwell Tuning Guide"]
    with pytest.raises(EntryNotFound):
        small.find("C > Stream-K")  # the name exists, but not in that section
    with pytest.raises(EntryNotFound) as err:
        small.find("Completely unrelated words")
    assert err.value.suggestions == []
    assert isinstance(err.value, UserError)


def test_a_name_given_by_some_of_its_words_is_suggested():
    """`new --entry "Roofline insightful"` suggested nothing (issue 26): spelled too far from the
    whole name for difflib, though every word asked for begins a word of one entry."""
    lst = parse_list("# S\n\n- Roofline: An Insightful Visual Performance Model - x\n- Stream-K - y\n")
    with pytest.raises(EntryNotFound) as err:
        lst.find("Roofline insightful")
    assert err.value.suggestions == ["Roofline: An Insightful Visual Performance Model"]
    with pytest.raises(EntryNotFound) as err:
        lst.find("roof perf")
    assert err.value.suggestions == ["Roofline: An Insightful Visual Performance Model"]


def test_duplicate_within_section_is_an_error():
    text = "## S\n\n- A - one\n- B - two\n- A - again\n\n## T\n\n- A - fine here\n"
    with pytest.raises(ListError) as err:
        parse_list(text, "dup.md")
    assert err.value.line == 5 and "lines 3 and 5" in str(err.value)
    assert str(err.value).startswith("dup.md:5: ")
    assert len(parse_list(text.replace("- A - again\n", "")).entries) == 3


# --- marker regions -------------------------------------------------------------------------

LINE = "- Stream-K - Work-centric GEMM."
REGION = "<!-- claimbench:Sec > Stream-K -->1.62× vs cuBLAS · H200<!-- /claimbench -->"


def test_render_insert_replace_remove():
    once = render_line(LINE, "1.62× vs cuBLAS · H200", "Sec > Stream-K")
    assert once == f"{LINE} {REGION}"
    assert render_line(once, "1.62× vs cuBLAS · H200", "Sec > Stream-K") == once
    replaced = render_line(once, "1.70×", "Sec > Stream-K")
    assert replaced == f"{LINE} <!-- claimbench:Sec > Stream-K -->1.70×<!-- /claimbench -->"
    assert render_line(once, "2×", "other-key").endswith("<!-- claimbench:other-key -->2×<!-- /claimbench -->")
    assert render_line(once, None, "Sec > Stream-K") == LINE
    assert render_line(LINE, None, "k") == LINE
    assert render_line(LINE + "\r\n", "x", "k") == LINE + " <!-- claimbench:k -->x<!-- /claimbench -->\r\n"


def test_render_keeps_text_outside_markers():
    line = "- A - desc  <!-- claimbench:k -->old<!-- /claimbench --> hand-written tail"
    out = render_line(line, "new", "k")
    assert out == "- A - desc  <!-- claimbench:k -->new<!-- /claimbench --> hand-written tail"
    assert render_line(line, None, "k") == "- A - desc  hand-written tail"


def test_render_rejects_bad_key_and_content():
    for key in ("", "a-->b", "a\nb"):
        with pytest.raises(ValueError):
            render_line(LINE, "x", key)
    for content in ("a\nb", "<!-- x", "x -->", "`x`"):
        with pytest.raises(ValueError):
            render_line(LINE, content, "k")


def test_read_region():
    lst = parse_list(f"## Sec\n\n{LINE} {REGION}\n- B - none\n")
    assert read_region(lst.entries[0]) == ("Sec > Stream-K", "1.62× vs cuBLAS · H200")
    assert read_region(lst.entries[1]) is None


def test_apply_on_list_md_is_idempotent_and_local(listing):
    text = LIST_MD.read_text(encoding="utf-8")
    a, b = listing.find("Stream-K"), listing.find("NVIDIA > Blackwell Tuning Guide")
    updates = {a.line: (a.key, "1.2× vs cuBLAS · H200 · bf16"), b.line: (b.key, "0.9 SOL · B200")}
    once = apply(text, updates)
    assert apply(once, updates) == once
    changed = [i + 1 for i, (x, y) in enumerate(zip(text.split("\n"), once.split("\n"))) if x != y]
    assert changed == sorted([a.line, b.line])
    again = parse_list(once)
    assert read_region(again.find("Stream-K")) == (a.key, "1.2× vs cuBLAS · H200 · bf16")
    assert [e.key for e in again.entries] == [e.key for e in listing.entries]
    removed = apply(once, {a.line: (a.key, None), b.line: (b.key, None)})
    assert removed == text


def test_apply_keeps_crlf_and_refuses_non_entry_lines():
    text = "## S\r\n\r\n- A - a\r\nprose\r\n"
    assert apply(text, {3: ("k", "1×")}) == "## S\r\n\r\n- A - a <!-- claimbench:k -->1×<!-- /claimbench -->\r\nprose\r\n"
    with pytest.raises(ListError) as err:
        apply(text, {4: ("k", "1×")}, "x.md")
    assert err.value.line == 4


@pytest.mark.parametrize("line, words", [
    ("- A - a <!-- claimbench:k -->1×", "unclosed"),
    ("- A - a 1×<!-- /claimbench -->", "stray"),
    ("- A - a <!-- claimbench:k -->1<!-- claimbench:j -->2<!-- /claimbench --><!-- /claimbench -->", "nested"),
    ("- A - a <!-- claimbench:k -->1<!-- /claimbench --> <!-- claimbench:j -->2<!-- /claimbench -->", "more than one"),
    ("- A - a <!-- claimbench:k 1×", "not closed with"),
    ("- A - a <!-- claimbench -->1<!-- /claimbench -->", "claimbench:KEY"),
    ("Prose <!-- claimbench:k -->1×<!-- /claimbench -->", "not a list entry"),
])
def test_bad_markers_are_list_errors(line, words):
    text = f"## S\n\n- B - fine\n{line}\n"
    with pytest.raises(ListError) as err:
        parse_list(text, "bad.md")
    assert err.value.line == 4 and words in str(err.value)
    with pytest.raises(ListError):
        apply(text, {3: ("k", "1×")})


@pytest.mark.parametrize("line", [
    "- A - a <!-- ClaimBench:S > A -->9.87× · [record](results/records/a/x.json)<!-- /ClaimBench -->",
    "- A - a <!-- CLAIMBENCH:S > A -->9.87×<!-- /claimbench -->",
    "- A - a <!-- claimbench:S > A -->9.87×<!--/Claimbench-->",
    "Prose <!-- Claimbench notes -->",
])
def test_markers_in_another_case_are_refused(line):
    """A look-alike marker was skipped by publish and audit alike, so a number inside it went
    unchecked; it is now a located list error that says how to write the marker."""
    with pytest.raises(ListError) as err:
        parse_list(f"## S\n\n- B - fine\n{line}\n", "case.md")
    assert err.value.line == 4 and "lower case" in str(err.value)
    assert "<!-- claimbench:KEY -->" in str(err.value)
    assert parse_list(f"## S\n\n- B - fine `{line}`\n").entries[0].name == "B"  # in code it is text


def test_a_closing_marker_with_more_text_is_refused():
    with pytest.raises(ListError) as err:
        parse_list("## S\n\n- A - a <!-- claimbench:k -->1×<!-- /claimbench x -->\n", "close.md")
    assert err.value.line == 3 and "closing marker must read '<!-- /claimbench -->'" in str(err.value)


def test_links_outside_regions():
    text = ("## S\n\n- A - a <!-- claimbench:k -->1× [record](results/records/a.json)<!-- /claimbench -->\n"
            "  1× [record](results/records/b.json \"t\") and [open](results/records/c.json\n"
            "`[record](results/records/d.json)` [toc](#s)\n"
            "```\n[record](results/records/e.json)\n```\n"
            "[r]: <results/records/f.json>\n")
    assert links_outside_regions(text) == [(4, "results/records/b.json"), (4, "results/records/c.json"),
                                           (5, "#s"), (9, "results/records/f.json")]


def test_markers_in_code_spans_are_text():
    text = "## S\n\nWrite `<!-- claimbench:KEY -->` to open.\n\n- A - uses `<!-- /claimbench -->` in prose\n"
    lst = parse_list(text)
    assert read_region(lst.entries[0]) is None
    out = render_line(lst.entries[0].text, "1×", "k")
    assert out == lst.entries[0].text + " <!-- claimbench:k -->1×<!-- /claimbench -->"
    assert render_line(out, None, "k") == lst.entries[0].text


def test_entry_is_frozen():
    e = Entry("S", "A", 1, "- A - a")
    with pytest.raises(AttributeError):
        e.name = "B"  # type: ignore[misc]
    assert e.key == "S > A" and Entry("", "A", 1, "").key == "A"


@pytest.mark.parametrize("heading", ["## Contents", "## Table of contents", "### Contents:"])
def test_contents_section_items_are_never_entries(heading):
    lst = parse_list(f"# T\n\n{heading}\n\n- Intro - where to start\n\n## Body\n\n- Intro - real\n")
    assert [(e.section, e.line) for e in lst.entries] == [("Body", 9)]
