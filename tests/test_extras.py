"""A missing extra is one line that names it, before the command does anything."""
from __future__ import annotations

import importlib.util

import pytest

from claimbench import extras
from claimbench.cli import main
from claimbench.errors import UserError


@pytest.fixture
def without(monkeypatch):
    """Pretend some import names are not installed."""
    gone: set[str] = set()
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in gone else real(name, *a))
    return gone


def test_require_names_the_extra_and_the_install_line(without):
    without.add("pandas")
    with pytest.raises(UserError) as e:
        extras.require("table", "claimbench table")
    msg = str(e.value)
    assert "\n" not in msg and "pandas" in msg and "[table]" in msg and "pip install 'claimbench[table]'" in msg


@pytest.mark.parametrize("argv, name, extra", [
    (["table"], "pandas", "table"),
    (["site"], "jinja2", "site"),
    (["run", "claims/cpu-softmax-fused-vs-naive.yaml"], "torch", "run"),
])
def test_commands_stop_with_one_line(without, capsys, monkeypatch, argv, name, extra, tmp_path):
    import shutil
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    shutil.copytree(root / "claims", tmp_path / "claims")
    shutil.copy(root / "LIST.md", tmp_path / "LIST.md")
    (tmp_path / "results").mkdir()
    monkeypatch.chdir(tmp_path)
    without.add(name)
    assert main(["--root", str(tmp_path), *argv]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"[{extra}]" in err[0] and name in err[0], err


def test_every_extra_is_declared_in_pyproject():
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")

    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert set(extras.EXTRAS) <= set(declared)
