"""The one rendering rule: text from claims and records reaches LIST.md escaped, a terminal without
escape sequences, and check refuses what would render differently from what its author sees."""

from __future__ import annotations

import re

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.report.audit import audit
from claimbench.report.publish import publish
from claimbench.spec import safetext
from claimbench.spec.listing import parse_list, read_region

NOW = "2026-12-01T12:00:00.000000Z"
HOSTILE = {
    "backtick": "torch`s softmax",
    "comment closer": "a ---->> b",
    "comment": "x --> <!-- y",
    "script": "<script>alert(1)</script>",
    "img onerror": '<img src=x onerror="alert(1)">',
    "javascript link": "[x](javascript:alert(1))",
    "image": "![x](https://example.org/t.png)",
    "pipe and emphasis": "a | *b* _c_ ~d~ $e$ \\f",
}


def test_plain_replaces_what_moves_or_hides_text():
    assert safetext.plain("a\u202eb\u2066c\x1b[31md\u200be\n  f\tg") == "a\ufffdb\ufffdc\ufffd[31md\ufffde f g"
    assert safetext.terminal("  kernel    60\x07") == "  kernel    60\ufffd"
    assert safetext.plain("Grüße, 東京 — ok") == "Grüße, 東京 — ok"


def test_markdown_escapes_every_metacharacter():
    assert safetext.markdown("[x](javascript:alert(1)) <b>&`") == "\\[x\\]\\(javascript:alert\\(1\\)\\) &lt;b&gt;&amp;&#96;"
    for text in HOSTILE.values():
        out = safetext.markdown(text)
        assert not re.search(r"[<>`]|\]\(|(?<!\\)\[|<!--|-->", out), out


@pytest.mark.parametrize("text, why", [
    ("fine text", None), ("tab\tand\nnewline", None),
    ("evil\u202etxt", "holds U+202E (RIGHT-TO-LEFT OVERRIDE) at character 5"),
    ("\x1b[31mred", "holds U+001B (a control or unassigned character) at character 1"),
    ("zero\u200bwidth", "holds U+200B (ZERO WIDTH SPACE) at character 5"),
])
def test_problem_names_the_first_bad_character(text, why):
    got = safetext.problem(text)
    assert (got is None) if why is None else got.startswith(why)


@pytest.fixture
def tree(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    publish(root, root / "LIST.md", root / "results", now=NOW)
    return root, recs


def rename_sides(root, kernel: str, baseline: str):
    claim = root / "claims" / "softmax-online.yaml"
    text = claim.read_text()
    text = re.sub(r"(kernel:\n  name: ).*", lambda m: m.group(1) + _yaml(kernel), text)
    text = re.sub(r"(baseline:\n  name: ).*", lambda m: m.group(1) + _yaml(baseline), text)
    claim.write_text(text)


def _yaml(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_claim_names_reach_the_list_escaped_and_nothing_crashes(tree, name, capsys):
    root, _ = tree
    text = HOSTILE[name]
    rename_sides(root, text, text)
    rk.commit_all(root, "hostile names")  # the record below is made at a commit that holds them
    assert main(["--root", str(root), "check", str(root / "claims" / "softmax-online.yaml")]) == 0
    rk.write(root, rk.build(root, "softmax-online", created="2026-11-25T09:00:00.000000Z", kernel_us=150,
                            baseline_us=243, seed=90))
    p = publish(root, root / "LIST.md", root / "results", now=NOW)
    listed = (root / "LIST.md").read_text(encoding="utf-8")
    listing = parse_list(listed)  # the list still parses: no marker was opened or closed by a name
    entry = listing.find("Online Normalizer Calculation for Softmax")
    _, region = read_region(entry)
    assert text not in region and safetext.markdown(text) in region
    assert region.count("[record](") == 2 and region.count("](") == 2  # the H100 run is stale: its claim changed
    assert audit(root, root / "LIST.md", root / "results", cache=False, now=NOW) == []
    assert not p.failed


@pytest.mark.parametrize("gpu_name", ["H200 `x` -->", "H200\n- [evil](javascript:1)", "H200 <script>", "H\u202e002H"])
def test_hostile_record_hardware_names_are_escaped(tree, gpu_name):
    root, _ = tree
    rec = rk.build(root, "blackwell-time", hw="nvidia-b200", created="2026-11-25T09:00:00.000000Z",
                   kernel_us=11.0, seed=91)
    hw = dict(rec.hardware)
    hw["gpus"] = [{**hw["gpus"][0], "name": "NVIDIA B200 " + gpu_name}]  # still the claim's GPU: only the text is hostile
    hw["name"] = gpu_name
    path = rk.write(root, rec.model_copy(update={"hardware": hw}))
    publish(root, root / "LIST.md", root / "results", now=NOW)
    listed = (root / "LIST.md").read_text(encoding="utf-8")
    entry = parse_list(listed).find("NVIDIA > Blackwell Tuning Guide")
    _, region = read_region(entry)
    assert "\u202e" not in listed and "<script>" not in listed and "](javascript" not in listed
    problems = audit(root, root / "LIST.md", root / "results", cache=False, now=NOW)
    if gpu_name.isascii() and gpu_name.isprintable():  # markup, escaped where it shows
        assert "11.0 µs" in region and safetext.markdown(gpu_name) in region
        assert problems == []
    else:  # a name no machine reports (a line break, a direction override): the record is refused
        assert "11.0 µs" not in region and path.name not in listed
        assert [p.message for p in problems if path.name in p.path and "not printable ASCII" in p.message], problems


def test_show_prints_no_escape_sequence_from_a_claim(tree, capsys):
    root, _ = tree
    claim = root / "claims" / "softmax-online.yaml"
    claim.write_text(claim.read_text().replace("title: Fixture claim softmax-online",
                                               'title: "\\e[2J\\e[31mowned\\u202e"'))
    assert main(["--root", str(root), "show", "softmax-online"]) == 1  # check refuses the title
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "title      \ufffd[2J\ufffd[31mowned\ufffd" in out
    assert "title: holds U+001B" in out


def test_check_refuses_unsafe_text_with_key_and_line(tree, capsys):
    root, _ = tree
    claim = root / "claims" / "softmax-online.yaml"
    claim.write_text(claim.read_text().replace("name: torch.softmax, eager", 'name: "torch\\u202esoftmax"'))
    assert main(["--root", str(root), "check", str(root / "claims" / "softmax-online.yaml")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == ("claims/softmax-online.yaml:25: baseline.name: holds U+202E (RIGHT-TO-LEFT OVERRIDE) at "
                      "character 6: invisible or text-reordering characters are not allowed; delete it")


@pytest.mark.parametrize(("text", "live"), [
    ("https://github.com/o/r/blob/main/results/records/x.json", "https://"),
    ("see www.example.org", "www."), ("WWW.EXAMPLE.ORG", "WWW."), ("mail a@b.co", "@"), ("ftp://x", "ftp://"),
])
def test_markdown_leaves_no_autolink(text, live):
    """GitHub turns a bare URL, `www.` or an address into a live link: a name on the list could carry
    one beside the number's own record link (an adversarial review, 2026-12-06)."""
    out = safetext.markdown(text)
    assert live not in out and "&#" in out, out


def test_markdown_keeps_a_plain_path_as_it_is():
    assert safetext.markdown("results/records/a-b/20261101T000000Z-x-0123456789.json") == \
        "results/records/a-b/20261101T000000Z-x-0123456789.json"


def test_long_plain_text_is_passed_through_in_constant_memory():
    """The check for text with nothing to escape took about 120 bytes a character (a backtracking entry
    each): a 6 MB machine name cost publish 850 MB (an adversarial review). A memory figure, not a time."""
    import tracemalloc

    from claimbench.spec.safetext import markdown

    text = "EPYC " + "x" * (2 << 20)
    tracemalloc.start()
    try:
        assert markdown(text) == text
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert markdown("a  b") == "a b" and markdown(" a") == "a" and markdown("a_b") == "a\\_b"
