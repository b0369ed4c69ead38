"""Strict JSON for records and sidecar caches, fast where orjson is installed, identical where not.

Audit reads 100,000 records whose raw-sample lists are mostly floats; orjson parses them several
times faster than the standard library. Both paths accept exactly the same documents: UTF-8
only, and no NaN or Infinity, which ``write_record`` never writes.
"""

from __future__ import annotations

import json
from typing import Any, Optional

try:
    from orjson import OPT_SORT_KEYS
    from orjson import dumps as _fast_dumps
    from orjson import loads as _fast_loads
except ImportError:  # pragma: no cover - orjson is a dependency, but records stay readable without it
    _fast_dumps = _fast_loads = None  # type: ignore[assignment]  # checked for None before each use
    OPT_SORT_KEYS = 0


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON; records are written without NaN or Infinity")


def loads_json(raw: bytes) -> Any:
    """Parse bytes; raises ValueError (a JSONDecodeError where the syntax is at fault)."""
    if _fast_loads is not None:
        return _fast_loads(raw)
    return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)


def dumps_json_line(obj: Any) -> str:
    """One compact line, newline included. Callers pass no NaN: nothing they write can hold one
    (records refuse it), and orjson would write it as null."""
    if _fast_dumps is not None:
        return _fast_dumps(obj).decode("utf-8") + "\n"
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False) + "\n"


CANONICAL = "o" if _fast_dumps is not None else "j"  # how this process writes canonical JSON


def canonical_json(obj: Any, method: str = CANONICAL) -> Optional[bytes]:
    """Sorted keys, no spaces: bytes to hash. The two methods differ in how they spell some floats
    (1e-05 / 1e-5), so a digest names its method, and one written with orjson cannot be
    recomputed where orjson is missing (None)."""
    if method == "o":
        return _fast_dumps(obj, option=OPT_SORT_KEYS) if _fast_dumps is not None else None
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
