"""The GPU check rehearsed for real (issue 24): `scripts/gpu_check.sh --dry-run` executes every
stage's code on CPU up to the device boundary, each fake named, and a fault planted in any stage
module fails it, as it would fail the first minute of a GPU window.

Before, `--dry-run` ran the stages' control flow but CI never ran it, and the fidelity stage died
at import on the code it would have met on the H200.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MODULES = sorted(p.stem for p in (ROOT / "scripts" / "gpucheck").glob("*.py") if p.stem != "__init__")
sys.path.insert(0, str(ROOT / "scripts"))
from gpu_check import ENTRY, STAGES  # noqa: E402  (the script's own table of stages)


def _dry_run(root: Path, out: Path, *, budget_s: float, stages: tuple[str, ...] = STAGES) -> tuple[int, dict, str]:
    env = {**os.environ, "PYTHON": sys.executable}
    env.pop("TRITON_INTERPRET", None)  # the script sets it for its stages itself
    p = subprocess.run(["bash", str(root / "scripts" / "gpu_check.sh"), "--out", str(out), "--budget-s", str(budget_s),
                        "--dry-run", "--results", str(out / "results"), "--work", str(out / "work"),
                        "--stages", ",".join(stages)],
                       capture_output=True, text=True, timeout=budget_s + 120, env=env, cwd=root)
    summary = json.loads((out / "summary.json").read_text()) if (out / "summary.json").is_file() else {}
    return p.returncode, summary, p.stdout + p.stderr


@pytest.mark.slow
def test_the_dry_run_executes_every_stage_and_passes(tmp_path):
    """A rehearsal's work does not grow with its budget (`cbrun.claim_budget` keeps a CPU claim's
    rounds at the least), so a generous budget costs nothing on a quiet machine (about 80 s here)
    and keeps a loaded one from cutting a stage short: the outcome does not depend on the load."""
    rc, summary, log = _dry_run(ROOT, tmp_path, budget_s=300)
    rows = {r["stage"]: r for r in summary.get("stages", [])}
    assert list(rows) == list(STAGES), log[-3000:]
    for name, r in rows.items():
        assert r["status"] in ("ok", "partial", "miss"), (name, r, log[-3000:])
    assert rc == 0, log[-3000:]
    assert "smoke claim: ok" in log and "fake: synthetic activities" in log and "fake: the CPU timer" in log, log[-3000:]
    assert re.search(r"imports: the \d+ stage modules import", log), log[:3000]
    # the rehearsal measures its small ceilings once, into the cache its claims read: no claim
    # measures the CPU again at full size (about 7 CPU-s each, for numbers that mean nothing here)
    claim_logs = sorted((tmp_path / "results").rglob("*.log"))
    assert any(p.name == "smoke-claim.log" for p in claim_logs), claim_logs
    measured = [p.name for p in claim_logs if "measuring the machine's ceilings" in p.read_text(errors="replace")]
    assert not measured, measured
    assert "smoke ceilings: (fake: a small CPU measurement" in log, log[:3000]


def _stages_importing(module: str) -> tuple[str, ...]:
    """The stages whose entry module reaches ``module`` through `from .x import` or by running it as
    a script (at any depth)."""
    src = {m: (ROOT / "scripts" / "gpucheck" / f"{m}.py").read_text(encoding="utf-8") for m in MODULES}
    uses = {m: set(re.findall(r"from \.(\w+) import", text)) | set(re.findall(r'"gpucheck" / "(\w+)\.py"', text))
            for m, text in src.items()}  # imported, or run as a script (drivers.py)

    def reaches(m: str, seen: set[str]) -> bool:
        return m == module or any(n not in seen and reaches(n, seen | {n}) for n in uses.get(m, ()))

    return tuple(s for s in STAGES if reaches(ENTRY[s].split(":")[0], {ENTRY[s].split(":")[0]}))


@pytest.mark.parametrize("module", MODULES)
def test_a_fault_planted_in_any_stage_module_fails_the_dry_run(tmp_path, module):
    root = tmp_path / "tree"
    root.mkdir()
    for name in ("src", "tests", "kernels", "claims", "LIST.md", "pyproject.toml"):
        (root / name).symlink_to(ROOT / name)
    shutil.copytree(ROOT / "scripts", root / "scripts", ignore=shutil.ignore_patterns("__pycache__"))
    target = root / "scripts" / "gpucheck" / f"{module}.py"
    text = target.read_text(encoding="utf-8")
    anchor = "from __future__ import annotations\n"
    assert anchor in text, module
    target.write_text(text.replace(anchor, anchor + "import claimbench_planted_fault  # noqa\n", 1), encoding="utf-8")
    stages = _stages_importing(module)
    assert stages, f"no stage reaches scripts/gpucheck/{module}.py: it would never run on the GPU"
    rc, summary, log = _dry_run(root, tmp_path / "out", budget_s=60, stages=stages)
    assert rc == 1 and "claimbench_planted_fault" in log, log[-3000:]
    if module != "stage_io":  # the script itself imports stage_io: it stops before any stage, with the traceback
        # the preflight imports every stage module first: the fault fails the run before any stage's work
        rows = {r["stage"]: r["status"] for r in summary["stages"]}
        assert rows.get("imports") == "fail" and set(rows) - {"imports"} == set(stages), log[-3000:]
        assert all(rows[s] == "skipped" for s in stages), log[-3000:]
