"""`claimbench schema` through the CLI: every kind under schema/, one kind to stdout, no rewrite of an
unchanged file."""

from __future__ import annotations

import json

from claimbench.cli import main
from claimbench.commands.schema import KINDS


def test_writes_every_kind_then_leaves_them_alone(tmp_path, capsys):
    (tmp_path / "claims").mkdir()
    assert main(["--root", str(tmp_path), "schema"]) == 0
    files = {kind: tmp_path / "schema" / name for kind, (name, _) in KINDS.items()}
    assert all(f.is_file() for f in files.values())
    assert json.loads(files["record"].read_text())["properties"]["schema_version"]["enum"]
    before = {k: f.stat().st_mtime_ns for k, f in files.items()}
    capsys.readouterr()
    assert main(["--root", str(tmp_path), "schema"]) == 0
    assert capsys.readouterr().out.count("unchanged") == len(KINDS)
    assert {k: f.stat().st_mtime_ns for k, f in files.items()} == before


def test_one_kind_to_stdout(tmp_path, capsys):
    assert main(["--root", str(tmp_path), "schema", "--kind", "index", "--stdout"]) == 0
    assert "v" in json.loads(capsys.readouterr().out)["required"]
    assert main(["--root", str(tmp_path), "schema", "--stdout"]) == 0  # the claim's, as before --kind
    assert json.loads(capsys.readouterr().out)["title"] == "Claim"
    assert not (tmp_path / "schema").exists()
