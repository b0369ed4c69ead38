"""The project's own list and records pass `claimbench audit`: every number in LIST.md is backed
by a current verified record, and every committed record recomputes to what it says.

It audits what is committed (HEAD, checked out in a clone sharing this one's objects), not the
working folder: a run, an ingest or a publish in progress changes the working folder, and the
README's commands must pass in any order. The clone holds this one's history, so each record's
commit is checked as audit checks it anywhere. In a shallow clone (`--depth`) the commits of older
records are absent and audit rightly says it cannot check them; this test then holds every other
check and names the commits it could not (`git fetch --unshallow` checks them too). Outside a git
checkout (an unpacked release) the folder is audited as it is, and a record's commit cannot be
checked there at all.
"""

import subprocess
from pathlib import Path

from claimbench.report.audit import audit

ROOT = Path(__file__).resolve().parents[1]
SHALLOW = "this clone is shallow"


def committed_tree(dst: Path) -> Path:
    """HEAD of this checkout, detached, in a clone at `dst` that shares its objects; ROOT itself outside git."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "-q", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode != 0:
        return ROOT
    subprocess.run(["git", "clone", "-q", "--shared", "--no-checkout", str(ROOT), str(dst)], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(dst), "checkout", "-q", "--detach", head.stdout.strip()], check=True, capture_output=True)
    (dst / "results" / "records").mkdir(parents=True, exist_ok=True)
    return dst


def test_the_committed_list_and_records_pass_audit(tmp_path):
    root = committed_tree(tmp_path / "head")
    problems = audit(root, root / "LIST.md", root / "results", cache=False)
    unchecked = [p for p in problems if p.key == "git_commit" and SHALLOW in p.message]
    if unchecked:
        print(f"{len(unchecked)} records' commits not checked: {SHALLOW} (git fetch --unshallow)")
    problems = [p for p in problems if p not in unchecked]
    assert problems == [], "\n".join(str(p) for p in problems[:10]) + (
        "\n(ingest the records, run `claimbench publish`, and commit LIST.md with results/records)")

