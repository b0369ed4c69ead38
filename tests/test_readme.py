"""The README's promises about itself: CI and `.ci/run` run its two commands as written, in its
order; its links resolve; nothing in the repository points outside it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> tuple[str, str]:
    """(main job, test command), as the README's "Two commands" write them."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    part = text.split("## Two commands", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```sh\n(.*?)\n```", part, re.S)
    assert len(blocks) == 2, blocks
    return blocks[0], blocks[1]


def test_each_command_installs_what_it_needs():
    main_job, tests = readme_commands()
    assert main_job.startswith("./scripts/bootstrap.sh run && ")
    script = (ROOT / tests.split()[0]).read_text()
    assert "./scripts/bootstrap.sh test" in script and "pytest" in script


def test_ci_runs_the_main_job_and_then_the_tests_as_written():
    main_job, tests = readme_commands()
    steps = yaml.safe_load((ROOT / ".github/workflows/policy.yml").read_text())["jobs"]["policy"]["steps"]
    runs = [" ".join(s.get("run", "").split()) for s in steps]
    where = [next(i for i, r in enumerate(runs) if r.startswith(cmd)) for cmd in (main_job, tests)]
    assert where[0] < where[1], "the main job must run before the tests"


def test_ci_run_is_the_readme_test_command():
    _, tests = readme_commands()
    assert (ROOT / ".ci/run").read_text().rstrip().splitlines()[-1] == tests


def test_documents_link_to_files_that_exist():
    """Relative links in the README, CONTRIBUTING.md and docs/. docs/sources.md comes with the
    claim library's own change; until it lands it is the one link allowed to wait."""
    pending = {ROOT / "docs" / "sources.md"}
    for doc in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path = (doc.parent / target).resolve()
            assert path.exists() or path in pending, f"{doc.name}: broken link {target}"


# the workspace folder next to the repository, spelled in pieces so this file does not name it
_SIBLING = "sha" + "red"
OUTSIDE = rf"\.\./{_SIBLING}/|(?<![\w.-]){_SIBLING}/[A-Za-z_-]+\.md"


def test_nothing_points_outside_the_repository():
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True).stdout.split()
    if not files:  # not a git checkout: every file is the project's
        files = [str(p.relative_to(ROOT)) for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts]
    hits = []
    for rel in files:
        path = ROOT / rel
        if path.suffix in (".json", ".png", ".svg") or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if re.search(OUTSIDE, text):
            hits.append(rel)
    assert hits == [], hits
