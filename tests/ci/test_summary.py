"""The Markdown job summary: appended, escaped, and kept under GitHub's 1 MiB."""

from pathlib import Path

from claimbench.ci.summary import LIMIT_BYTES, write_summary
from claimbench.machine.hardware import CpuInfo, Hardware, Software
from claimbench.runner import Outcome
from claimbench.stats.status import Status

HW = Hardware(device="cpu", gpus=(), cpu=CpuInfo("Test CPU", 2, 2, None, None),
              software=Software("3.11", "2.13", None, None, None, "0.1", "abcdef1234567890", True))


def _o(cid: str, status: Status, reason: str = "why", value=None, ci=(None, None)) -> Outcome:
    return Outcome(cid, Path(f"claims/{cid}.yaml"), status, reason, None, value, ci[0], ci[1],
                   "speedup", 1.5, "Test CPU")


def test_a_table_row_per_claim_with_value_ci_and_verdict(tmp_path):
    p = tmp_path / "summary.md"
    write_summary(p, HW, [_o("a", Status.VERIFIED, "ok", 1.61, (1.58, 1.64)),
                          _o("b", Status.SKIPPED, "needs NVIDIA H100*, found CPU (Test CPU)")])
    text = p.read_text()
    assert "| claim | hardware | measured [95% CI] | claimed | verdict | reason |" in text
    assert "| `a` | Test CPU | 1.61 [1.58, 1.64] | speedup 1.5 | ✅ verified | ok |" in text
    assert "⏭️ skipped" in text and "needs NVIDIA H100*" in text
    assert "commit `abcdef123456` (dirty)" in text
    assert "1 skipped, 1 verified" in text


def test_appends_like_a_step_summary(tmp_path):
    p = tmp_path / "summary.md"
    p.write_text("# earlier step\n")
    write_summary(p, HW, [_o("a", Status.ERROR)])
    write_summary(p, HW, [_o("b", Status.REFUTED)])
    text = p.read_text()
    assert text.startswith("# earlier step\n")
    assert text.index("`a`") < text.index("`b`")
    assert "❌ refuted" in text


def test_reasons_cannot_break_the_table(tmp_path):
    p = tmp_path / "summary.md"
    write_summary(p, HW, [_o("a", Status.INCORRECT, "x | y\nz <script>" + "w" * 1000)])
    row = next(line for line in p.read_text().splitlines() if line.startswith("| `a`"))
    assert row.count(" | ") == 5  # still six cells
    assert "\\|" in row and "<script>" not in row and "…" in row


def test_kept_under_one_mebibyte_with_a_note(tmp_path):
    p = tmp_path / "summary.md"
    p.write_text("x" * (LIMIT_BYTES - 50_000))
    many = [_o(f"claim-{i:05d}", Status.INCONCLUSIVE, "r" * 250) for i in range(5000)]
    write_summary(p, HW, many)
    size = p.stat().st_size
    assert size < LIMIT_BYTES
    text = p.read_text()
    assert "more claim(s) not shown" in text
    shown = text.count("| `claim-")
    assert 0 < shown < 5000
    assert f"{5000 - shown} more claim(s)" in text


def test_a_full_file_gets_nothing_more(tmp_path):
    p = tmp_path / "summary.md"
    p.write_text("x" * (LIMIT_BYTES - 10))
    write_summary(p, HW, [_o("a", Status.VERIFIED)])
    assert p.stat().st_size == LIMIT_BYTES - 10


def test_no_control_or_bidi_character_reaches_the_summary(tmp_path):
    p = tmp_path / "summary.md"
    write_summary(p, HW, [_o("a", Status.ERROR, "boom \x1b[31m\u202eeulav `code`")])
    row = next(line for line in p.read_text().splitlines() if line.startswith("| `a`"))
    assert "\x1b" not in row and "\u202e" not in row and row.endswith("boom \ufffd[31m\ufffdeulav &#96;code&#96; |")
