"""The package's face: one version source, the license pyproject names, the classifiers' Pythons."""

import importlib.metadata
import re
from pathlib import Path

import claimbench

ROOT = Path(__file__).resolve().parents[1]


def test_the_installed_version_is_the_packages():
    assert importlib.metadata.version("claimbench") == claimbench.__version__
    assert not re.search(r'^version\s*=\s*"', (ROOT / "pyproject.toml").read_text(), re.M), "one source: __version__"


def test_license_file_matches_pyproject():
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")


def test_classifiers_name_the_pythons_requires_python_admits():
    meta = importlib.metadata.metadata("claimbench")
    lowest = re.fullmatch(r">=3\.(\d+)", meta["Requires-Python"])
    assert lowest, meta["Requires-Python"]
    named = {int(c.rsplit(".", 1)[1]) for c in meta.get_all("Classifier") if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert min(named) == int(lowest.group(1)) and named == set(range(min(named), max(named) + 1))
