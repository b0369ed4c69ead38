"""Draft-07 JSON Schemas from the pydantic models: the claim's for editors, the record's and the index
line's for readers and tools that consume `results/` without claimbench.

Draft-07 because yaml-language-server, the editors' validator, reads it; pydantic writes 2020-12,
and the few constructs the two spell differently are rewritten here, once for every schema.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel

DRAFT_07 = "http://json-schema.org/draft-07/schema#"


def draft07_schema(model: type[BaseModel], *, mode: str = "validation", description: str = "") -> dict[str, Any]:
    """``model``'s schema as draft-07: `$defs` become `definitions`, `const` gains an `enum`, and an
    infinite bound (which JSON cannot hold) becomes null. ``mode="serialization"`` describes what
    the model writes (a record file) rather than what it accepts."""
    schema = model.model_json_schema(ref_template="#/definitions/{model}",
                                     mode="serialization" if mode == "serialization" else "validation")
    schema["definitions"] = schema.pop("$defs", {})
    if description:
        schema["description"] = description
    return _draft07({"$schema": DRAFT_07, **schema})


def _draft07(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _draft07(v) for k, v in node.items()}
        if "const" in out and "enum" not in out:
            out["enum"] = [out["const"]]
        return out
    if isinstance(node, list):
        return [_draft07(v) for v in node]
    if isinstance(node, float) and math.isinf(node):
        return None
    return node
