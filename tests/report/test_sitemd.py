"""sitemd: the list's Markdown as HTML that cannot run anything and cannot reorder text."""

from __future__ import annotations

import pytest

from claimbench.report.sitemd import clean, inline, render, safe_url, slug


def test_clean_shows_control_and_bidi_characters():
    assert clean("a\u202eb\u2066c\x1bd\te") == "a[U+202E]b[U+2066]c[U+001B]d\te"
    assert clean("plain text, ünïcode") == "plain text, ünïcode"


def test_only_http_links_and_known_anchors_become_links():
    assert safe_url("https://example.org/a(b)") == "https://example.org/a(b)"
    for bad in ("javascript:alert(1)", "JaVaScRiPt:x", "data:text/html,x", "../secret", "//evil", "http://a b", 'http://x"y'):
        assert safe_url(bad) is None, bad
    assert inline("[a](https://x.org) [b](javascript:alert(1)) [c](#top) [d](#nowhere)", frozenset({"top"})) == (
        '<a href="https://x.org">a</a> b <a href="#top">c</a> d')


def test_inline_escapes_everything_else():
    assert inline("**bold** `<b>` <i>x</i> & <!-- gone --> `<!-- kept -->`") == (
        "<strong>bold</strong> <code>&lt;b&gt;</code> &lt;i&gt;x&lt;/i&gt; &amp;  <code>&lt;!-- kept --&gt;</code>")


def test_slug_matches_github_anchors():
    assert [slug(t) for t in ("1. GPU fundamentals", "CUTLASS, CuTe, and CUDA Tile", "Start here: the minimum mental model")] == [
        "1-gpu-fundamentals", "cutlass-cute-and-cuda-tile", "start-here-the-minimum-mental-model"]


def test_render_drops_empty_sections_and_nests_lists():
    text = "# T\n\nIntro.\n\n## Empty\n\n## Full\n\n### Also empty\n\n## Lists\n\n- a\n  - b\n- c\n\n1. one\n"
    heads = {1: (1, "T"), 5: (2, "Empty"), 7: (2, "Full"), 9: (3, "Also empty"), 11: (2, "Lists")}
    kept, html = render(text, heads, lambda line: "")
    assert [h.text for h in kept] == ["Lists"]
    assert html == ('<p>Intro.</p>\n<h2 id="lists">Lists</h2>\n'
                    "<ul><li>a<ul><li>b</li></ul></li><li>c</li></ul>\n<ol><li>one</li></ol>")


@pytest.mark.parametrize("unit", ["[", "<!--", "<!-- claimbench:k -->", "`", "**"])
def test_a_line_of_openers_with_no_closer_renders_in_one_pass(unit):
    """Each lazy scan for a closer ran to the line's end: 20,000 `[` took 6.9 s to render, and a 1.5 MB
    hostile list 285 s (an adversarial review). A hang guard with a wide margin, not a speed test: the
    200,000 openers take a fraction of a second now, and minutes on the code before."""
    import subprocess
    import sys

    code = ("from claimbench.report.sitemd import inline, uncomment; import sys; "
            f"t = {unit!r} * 200000; h = inline(t); assert '<a' not in h and '<code' not in h or {unit!r} == '`'; "
            "uncomment(t); print('ok')")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "ok", p.stderr[-2000:]
