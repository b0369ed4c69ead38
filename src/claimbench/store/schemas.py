"""JSON Schemas of what `results/` holds: a record file, and one line of `results/index.jsonl`.

A reader's tool (a dashboard, a notebook, another lab's CI) can check what it consumes without
importing claimbench; `claimbench schema` writes them under `schema/`, and a test fails when the
committed files drift from the models. The record's is what `Record` writes (serialization mode):
the current layout, which the stored files of `RECORD_SCHEMAS_AS_STORED` have; older records are
migrated on load, never on disk.
"""

from __future__ import annotations

import typing
from typing import Any

from pydantic import ConfigDict, create_model

from claimbench.spec.draft07 import draft07_schema
from claimbench.store.index import INDEX_NAME
from claimbench.store.record import Record
from claimbench.store.summary import Summary
from claimbench.versions import INDEX_VERSION, RECORD_SCHEMAS_AS_STORED, SCHEMA_VERSION


def record_schema() -> dict[str, Any]:
    schema = draft07_schema(Record, mode="serialization", description=(
        f"One claimbench run of one claim on one machine (results/records/<claim id>/*.json), "
        f"record schema version {SCHEMA_VERSION}; files of versions {', '.join(map(str, RECORD_SCHEMAS_AS_STORED))} "
        "have this layout as stored, older ones are migrated when claimbench reads them."))
    schema["properties"]["schema_version"].update(enum=list(RECORD_SCHEMAS_AS_STORED))
    return schema


def index_line_schema() -> dict[str, Any]:
    """One line of the index: every `Summary` field, as `_to_json` writes them all, and its version `v`."""
    hints = typing.get_type_hints(Summary)
    fields: dict[str, Any] = {name: (hints[name], Summary._field_defaults.get(name, ...)) for name in Summary._fields}
    fields["v"] = (int, ...)
    model = create_model("IndexLine", __config__=ConfigDict(extra="forbid"), **fields)
    schema = draft07_schema(model, description=(
        f"One line of results/{INDEX_NAME}, a cache of one record's summary; index version {INDEX_VERSION} "
        "(a line of another version is ignored and rebuilt)."))
    schema["properties"]["v"].update(const=INDEX_VERSION, enum=[INDEX_VERSION])
    schema["required"] = [*Summary._fields, "v"]
    return schema
