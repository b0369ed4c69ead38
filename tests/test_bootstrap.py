"""scripts/bootstrap.sh runs pip only when something it installs changed (both README commands call
it on every run): a fake venv Python records what the script asks of it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# Answers the script's probes (torch found, setuptools new enough; the installed-requirements probe,
# read from stdin, as the file `missing` says) and logs every call; `pip install` is a call like any other.
FAKE_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$(dirname "$0")/../calls.log"
if [ "$1" = "-" ] && [ -f "$(dirname "$0")/../missing" ]; then exit 1; fi
if [ "$2" = "compileall" ] && [ -f "$(dirname "$0")/../py312" ]; then
  echo "*** Error compiling '/v/site-packages/torch/testing/_internal/py312_intrinsics.py'..."; exit 1
fi
exit 0
"""


# uv as the script finds it in the venv: logs its call; fails when the file `uv-fails` is there.
FAKE_UV = """#!/usr/bin/env bash
echo "uv $*" >> "$(dirname "$0")/../calls.log"
if [ -f "$(dirname "$0")/../uv-fails" ]; then exit 1; fi
exit 0
"""


def _tree(tmp_path: Path) -> Path:
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "bootstrap.sh", root / "scripts" / "bootstrap.sh")
    shutil.copy(ROOT / "pyproject.toml", root / "pyproject.toml")
    python = root / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    uv = root / ".venv" / "bin" / "uv"
    uv.write_text(FAKE_UV)
    uv.chmod(0o755)
    return root


def _bootstrap(root: Path, *extras: str) -> list[str]:
    log = root / ".venv" / "calls.log"
    log.unlink(missing_ok=True)
    p = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), *extras], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return [line for line in log.read_text().splitlines()
            if line.startswith("uv pip install") or (line.startswith("-m pip install") and " -e " in line)]


def test_pip_runs_once_until_pyproject_or_the_extras_change(tmp_path):
    root = _tree(tmp_path)
    assert len(_bootstrap(root, "test")) == 1  # first time: installed
    assert _bootstrap(root, "test") == []  # nothing changed: pip is not run
    assert len(_bootstrap(root, "run")) == 1  # other extras: installed
    assert _bootstrap(root, "run") == [] and _bootstrap(root, "test") == []
    with (root / "pyproject.toml").open("a") as f:
        f.write("\n# a change\n")
    assert len(_bootstrap(root, "test")) == 1  # pyproject.toml changed: installed again


def test_a_moved_checkout_installs_again(tmp_path):
    root = _tree(tmp_path)
    assert len(_bootstrap(root, "test")) == 1
    moved = tmp_path / "moved"
    root.rename(moved)
    assert len(_bootstrap(moved, "test")) == 1  # the editable install points at the old path


def test_a_requirement_removed_by_hand_installs_again(tmp_path):
    root = _tree(tmp_path)
    assert len(_bootstrap(root, "test")) == 1
    (root / ".venv" / "missing").write_text("")  # e.g. `pip uninstall numpy` since
    assert len(_bootstrap(root, "test")) == 1


def test_modules_are_compiled_after_an_install_and_a_file_for_a_later_python_is_named_not_fatal(tmp_path):
    """pip installs with --no-compile; compileall runs once after an install, never on a stamp hit. A
    file only a later Python can parse (torch ships one) makes compileall exit 1: the install goes on."""
    root = _tree(tmp_path)
    (root / ".venv" / "py312").write_text("")
    log = root / ".venv" / "calls.log"
    p = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    assert [c for c in calls if c.startswith("-m pip install")] == [c for c in calls if "--no-compile" in c]
    assert len([c for c in calls if c.startswith("-m compileall")]) == 1
    assert "1 installed file(s) are not valid for this Python" in p.stderr and "py312_intrinsics.py" in p.stderr
    log.unlink()
    p = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and not [c for c in log.read_text().splitlines() if "compileall" in c]


def test_the_extras_go_through_uv_and_through_pip_when_uv_fails(tmp_path):
    """uv unpacks on every core (a fresh clone's bootstrap 44.6 -> 28.2 s); where it fails, pip installs
    the extras as before and one line says so."""
    root = _tree(tmp_path)
    (installed,) = _bootstrap(root, "test")
    assert installed.startswith("uv pip install") and "-e .[test]" in installed
    (root / ".venv" / "uv-fails").write_text("")
    (root / "pyproject.toml").write_text((root / "pyproject.toml").read_text() + "\n# a change\n")
    p = subprocess.run(["bash", str(root / "scripts" / "bootstrap.sh"), "test"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "uv could not install the extras; pip installs them" in p.stderr, p.stderr
    calls = (root / ".venv" / "calls.log").read_text().splitlines()
    assert [c.split(" -e ")[0] for c in calls if " -e " in c][-2:] == \
        ["uv pip install -q --python .venv/bin/python --no-build-isolation", "-m pip install -q --no-compile --no-build-isolation"]
