"""spec/listhazards.py: text a renderer shows otherwise than claimbench reads it, each a located line.

Every case is one an adversarial review (2026-12-06) used on a published list with `audit` clean: the
list as GitHub renders it showed another entry, another number or a link the region does not hold."""

from __future__ import annotations

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.report.publish import publish
from claimbench.spec.listhazards import hazards

SOFTMAX = "Online Normalizer Calculation for Softmax"
REGION = "<!-- claimbench:Foundational kernel exercises > Online Normalizer Calculation for Softmax -->"


@pytest.fixture
def published(tmp_path):
    root, _ = rk.standard_tree(tmp_path / "proj")
    publish(root, root / "LIST.md", root / "results")
    text = (root / "LIST.md").read_text(encoding="utf-8")
    assert hazards(text) == [] and main(["--root", str(root), "audit", "--no-cache"]) == 0
    return root, text


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), start=1) if needle in line)


CASES = {
    # a lone CR ends the line for GitHub: the number renders under a made-up entry
    "carriage return": (f"streaming pass. {REGION}", f"streaming pass.\r- FlashAttention-3 on H100 SXM (bf16) - {REGION}",
                        "carriage return without a line feed"),
    # a digit just before the region: 1.62x reads 11.62x
    "digit before": (f"streaming pass. {REGION}", f"streaming pass. 1{REGION}", "touches the claimbench marker region"),
    # text after the region reads as part of the published number
    "text after": ("eager · fixture kernel softmax-online", "eager · fixture kernel softmax-online", None),
    # a bidirectional override changes what the line shows
    "bidi": (f"{SOFTMAX} - Finds", f"{SOFTMAX}\u202e - Finds", "U+202E"),
    "zero width": (f"{SOFTMAX} - Finds", f"{SOFTMAX}\u200b - Finds", "U+200B"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_hazard_on_an_entry_line_is_named_with_its_line_and_fails_audit(published, capsys, case):
    root, text = published
    old, new, phrase = CASES[case]
    if case == "text after":
        line = next(x for x in text.split("\n") if REGION in x)
        edited = text.replace(line, line + " · 2× H100 · bf16: 41.20× [40.90, 41.60]")
        phrase = "text after the claimbench marker region"
    else:
        assert old in text
        edited = text.replace(old, new, 1)
    got = hazards(edited)
    assert any(phrase in why for _, why in got), got
    assert {line for line, _ in got} == {_line(edited.replace("\r", "\n"), SOFTMAX)} or case == "carriage return"
    (root / "LIST.md").write_text(edited, encoding="utf-8", newline="")
    capsys.readouterr()
    assert main(["--root", str(root), "audit", "--no-cache"]) == 1
    assert phrase in capsys.readouterr().out


def test_a_link_definition_turning_the_published_interval_into_a_link(published):
    _, text = published
    edited = text + "\n[1.61, 1.63]: https://evil.example/reproduced-on-h100.json\n"
    (got,) = hazards(edited)
    assert got[0] == _line(edited, "[1.61, 1.63]: https://") and "a link reference definition" in got[1]


@pytest.mark.parametrize("fake", [
    "41.20× [40.90, 41.60] vs FlashAttention-2 · H100 · bf16",
    "640 TFLOP/s [637, 642] · H100",
    "<!-- claimbenсh:x -->41.2x \\[40.9, 41.6\\]<!-- /claimbenсh -->",  # look-alike markers (Cyrillic с)
])
def test_a_number_in_claimbenchs_format_outside_every_region(published, fake):
    _, text = published
    edited = text.replace("hand-written text stays.", f"hand-written text stays. {fake}", 1)
    got = hazards(edited)
    assert [why for _, why in got if "a number in claimbench's format outside every marker region" in why], got


def test_an_encoded_mention_of_the_records_folder(published):
    _, text = published
    edited = text.replace("hand-written text stays.", "hand-written text stays. [r](https://github.com/o/r/blob/main/"
                          "results%2Frecords/mla/x.json)", 1)
    assert any("encoded or through a dotted path" in why for _, why in hazards(edited))


def test_what_is_fine_stays_fine():
    text = ("\ufeff# List\n\n> Numbers between `<!-- claimbench:... -->` markers are written by publish; "
            "a range like `3.5× [3.3, 3.6]` in code is text.\n\n```\n1.62× [1.61, 1.63]\n```\n\n"
            "- An entry - up to 2x faster, see [1, 2] and [3].\r\n- Another - résumé, naïve, 東京.\n")
    assert hazards(text) == []


@pytest.mark.parametrize("fake", [
    " 2.41× [2.39,\n  2.43] vs cuBLAS · H100 · [record](https://evil.example/r.json)",  # over two lines
    " 2.41×" + " " * 30 + "[2.39, 2.43] vs cuBLAS",  # the browser collapses the spaces
    " 2.41× [2.39[](), 2.43] vs cuBLAS",  # an empty link shows nothing
    " 2.41× [[2.39, 2.43]](https://evil.example/r.json) vs cuBLAS",  # the interval as a link's text
    " 2.41× [2.39, 2.4*3*] vs cuBLAS",  # emphasis inside
    " 2.41× ［2.39, 2.43］ vs cuBLAS",  # fullwidth brackets
])
def test_a_number_is_looked_for_as_a_reader_sees_the_paragraph(published, fake):
    """A third review went around the line-by-line number search six ways (`audit` exit 0 each)."""
    _, text = published
    edited = text.replace("hand-written text stays.", "hand-written text stays." + fake, 1)
    assert any("a number in claimbench's format" in why for _, why in hazards(edited)), hazards(edited)


def test_a_fence_inside_a_list_item_and_a_bullet_github_does_not_read(published):
    """GitHub ends a fence opened inside a list item with the item, claimbench did not: the lines between two
    such fences, a forged region among them, were code to every check and a published number on GitHub. And
    `•` is a bullet to claimbench, text joining the paragraph above on GitHub."""
    _, text = published
    fence = text.replace("### Matrix multiplication\n", "### Matrix multiplication\n\n- FlashMLA - Decoding kernels.\n"
                         "  ```\n- CUTLASS - GEMM. 1.41x vs cuBLAS\n- ThunderKittens - Tiles.\n  ```\n", 1)
    assert [line for line, why in hazards(fence) if "an indented code fence" in why] == \
        [_line(fence, "FlashMLA") + 1, _line(fence, "ThunderKittens") + 1]
    bullet = text.replace(f"- {SOFTMAX}", f"• {SOFTMAX}", 1)
    assert any("a bullet GitHub does not read as one" in why for _, why in hazards(bullet))
    image = text.replace("hand-written text stays.", "hand-written text stays. ![speedup](https://evil.example/n.png)", 1)
    assert any("an image outside the markers" in why for _, why in hazards(image))  # it can draw any number


def test_the_number_search_is_linear_on_a_hostile_line():
    """`[1,1,1,...` with no closing bracket made the interval search quadratic (64.5 s for a 120 KB list);
    a hang guard with a wide margin: it takes a fraction of a second now."""
    import subprocess
    import sys

    code = "from claimbench.spec.listhazards import hazards; hazards('x [' + '1,' * 200000); print('ok')"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.stdout.strip() == "ok", p.stderr[-2000:]
