"""The committed JSON Schema is the models' schema, valid draft-07, and admits the valid fixture."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import yaml

from claimbench.spec.claim import json_schema

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "schema" / "claim.schema.json"
VALID = ROOT / "tests" / "fixtures" / "claims" / "valid" / "softmax-cpu.yaml"


def _committed() -> dict:
    return json.loads(COMMITTED.read_text(encoding="utf-8"))


def test_committed_schema_has_not_drifted():
    # round-trip through JSON so tuples/lists and key order compare as the file stores them
    current = json.loads(json.dumps(json_schema()))
    assert _committed() == current, (
        "schema/claim.schema.json is out of date with claimbench.spec.claim; run `claimbench schema` and commit it")


def test_schema_is_valid_draft07():
    schema = _committed()
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"
    jsonschema.Draft7Validator.check_schema(schema)


def test_valid_fixture_validates():
    data = yaml.safe_load(VALID.read_text(encoding="utf-8"))
    jsonschema.Draft7Validator(_committed()).validate(data)


def test_schema_rejects_what_the_gate_rejects():
    data = yaml.safe_load(VALID.read_text(encoding="utf-8"))
    validator = jsonschema.Draft7Validator(_committed())
    for broken in ({**data, "correctnes": {}},
                   {k: v for k, v in data.items() if k != "hardware"},
                   {**data, "source": {**data["source"], "kind": "vendor-datasheet"}},
                   {**data, "claimed": {**data["claimed"], "tolerance": -0.1}}):
        assert list(validator.iter_errors(broken)), broken


def test_every_field_is_described():
    schema = _committed()
    missing = [f"{name}.{field}" for name, d in schema["definitions"].items()
               for field, spec in d.get("properties", {}).items() if "description" not in spec]
    missing += [f"Claim.{f}" for f, spec in schema["properties"].items()
                if "description" not in spec and "$ref" not in spec and "allOf" not in spec]
    assert not missing, missing
