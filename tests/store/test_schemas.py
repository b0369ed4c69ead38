"""The committed record and index-line schemas are the models', valid draft-07, admit what the runner
writes and refuse what the loaders refuse."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import recordkit as rk

from claimbench.commands.schema import KINDS, render
from claimbench.store import index as ix
from claimbench.store.migrate import MIGRATIONS
from claimbench.versions import RECORD_SCHEMAS_AS_STORED, SCHEMA_VERSION

ROOT = Path(__file__).resolve().parents[2]
RECORDS = sorted((ROOT / "results" / "records").glob("*/*.json"))


def _committed(kind: str) -> dict:
    return json.loads((ROOT / "schema" / KINDS[kind][0]).read_text(encoding="utf-8"))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_committed_schema_has_not_drifted(kind):
    assert _committed(kind) == json.loads(render(kind)), (
        f"schema/{KINDS[kind][0]} is out of date with the models; run `claimbench schema` and commit it")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_valid_draft07(kind):
    schema = _committed(kind)
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)


def test_every_committed_record_validates():
    assert RECORDS, "the repository ships records under results/records"
    validator = jsonschema.Draft7Validator(_committed("record"))
    for path in RECORDS:
        errors = [e.message for e in validator.iter_errors(json.loads(path.read_text(encoding="utf-8")))]
        assert not errors, (path.name, errors[:3])


def test_the_record_schema_refuses_what_the_loader_refuses():
    data = json.loads(RECORDS[0].read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(_committed("record"))
    for broken in ({**data, "verdikt": "verified"},               # an unknown key: extra="forbid"
                   {k: v for k, v in data.items() if k != "claim_id"},
                   {**data, "schema_version": 1},                 # another layout: migrated on load, not described
                   {**data, "value": "fast"}):
        assert list(validator.iter_errors(broken)), sorted(set(broken) ^ set(data)) or broken


def test_the_versions_described_as_stored_differ_from_the_current_only_in_their_number():
    for path in RECORDS:
        data = json.loads(path.read_text(encoding="utf-8"))
        version = data["schema_version"]
        assert version in RECORD_SCHEMAS_AS_STORED, path.name
        while version < SCHEMA_VERSION:
            migrated = MIGRATIONS[version](data)
            assert {**migrated, "schema_version": version} == data  # nothing but the number moved
            data, version = migrated, migrated["schema_version"]


def test_index_lines_the_runner_writes_validate(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    ix.read_index(root / "results")  # writes the index
    validator = jsonschema.Draft7Validator(_committed("index"))
    lines = [json.loads(line) for line in (root / "results" / ix.INDEX_NAME).read_text().splitlines()]
    assert len(lines) == len(recs)
    for line in lines:
        assert not [e.message for e in validator.iter_errors(line)], line["path"]
    line = lines[0]
    for broken in ({**line, "v": line["v"] - 1}, {k: v for k, v in line.items() if k != "sha256"},
                   {**line, "extra": 1}, {**line, "size": "big"}):
        assert list(validator.iter_errors(broken))
