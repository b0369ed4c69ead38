"""The project's own list and records pass `claimbench audit`: every number in LIST.md is backed
by a current verified record, and every committed record recomputes to what it says."""

from pathlib import Path

from claimbench.audit import audit

ROOT = Path(__file__).resolve().parents[1]


def test_the_shipped_list_and_records_pass_audit():
    problems = audit(ROOT, ROOT / "LIST.md", ROOT / "results", cache=False)
    assert problems == [], "\n".join(str(p) for p in problems[:10]) + "\n(run `claimbench publish`)"
