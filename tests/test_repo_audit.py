"""The project's own list and records pass `claimbench audit`: every number in LIST.md is backed
by a current verified record, and every committed record recomputes to what it says.

It audits what is committed (the tree at HEAD, exported to a temporary folder), not the working
folder: a run, an ingest or a publish in progress changes the working folder, and the README's
commands must pass in any order. Outside a git checkout (an unpacked release) the folder is the
committed state, and it is audited as it is.
"""

import io
import subprocess
import tarfile
from pathlib import Path

from claimbench.report.audit import audit

ROOT = Path(__file__).resolve().parents[1]
AUDITED = ("LIST.md", "claims", "kernels", "results/records")


def committed_tree(dst: Path) -> Path:
    """HEAD's LIST.md, claims, kernels and records under `dst`; ROOT itself outside git."""
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--verify", "-q", "HEAD"],
                          capture_output=True, text=True)
    if head.returncode != 0:
        return ROOT
    paths = subprocess.run(["git", "-C", str(ROOT), "ls-tree", "--name-only", "HEAD", "--", *AUDITED],
                           capture_output=True, text=True, check=True).stdout.split()
    data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD", "--", *paths],
                          capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dst, **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))
    (dst / "results" / "records").mkdir(parents=True, exist_ok=True)
    return dst


def test_the_committed_list_and_records_pass_audit(tmp_path):
    root = committed_tree(tmp_path / "head")
    problems = audit(root, root / "LIST.md", root / "results", cache=False)
    assert problems == [], "\n".join(str(p) for p in problems[:10]) + (
        "\n(ingest the records, run `claimbench publish`, and commit LIST.md with results/records)")

