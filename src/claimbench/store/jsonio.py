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


def twice_keyed(raw: bytes, data: Any) -> Optional[str]:
    """The first key that appears twice in one object of ``raw`` (whose parse is ``data``), or None.

    JSON readers disagree on which of two equal keys wins (RFC 8259, section 4: names SHOULD be
    unique; orjson, Python and JavaScript keep the last, others the first or refuse), so such a
    file can show a reader a value other than the one checked. Decided by counting strings: each
    string of ``raw`` is one string of ``data`` written back, unless a duplicate was dropped with
    its key, so the counts are equal exactly when no key repeats (about 20 us for a 9 KB record,
    most of it writing ``data`` back; the standard parser, 10 times slower, runs only to name the key).
    A document too deep for either to walk raises ValueError: unchecked is never unique."""
    seen: list[str] = []

    def pairs(items: list) -> dict:
        keys = [k for k, _ in items]
        if not seen and len(set(keys)) < len(keys):
            seen.append(next(k for i, k in enumerate(keys) if k in keys[:i]))
        return dict(items)

    try:
        if _strings(raw) == _strings(_dumps(data)):
            return None
        json.loads(raw.decode("utf-8"), object_pairs_hook=pairs, parse_constant=_no_constant)
    except (TypeError, ValueError, RecursionError) as e:  # orjson writes 255 levels, Python reads about 1,000
        raise ValueError(f"cannot be checked for a repeated key ({e}); a record the runner writes is a few levels deep") from None
    return seen[0] if seen else ""  # the counts disagree, so refused even if no key could be named


def no_key_twice(raw: bytes, pruned: Any) -> bool:
    """True when ``raw`` provably holds no key twice, from ``pruned``: its parse with any values
    replaced by stand-ins that hold no string (a record's sample lists, say, which are most of the
    cost of writing it back). Each string of ``raw`` is a string of its parse unless a duplicate was
    dropped, and pruning only removes strings, so equal counts leave room for neither; False says
    only that `twice_keyed` must decide (about 14 us against 18 for a 9 KB record), as it does for
    a document too deep to write back."""
    try:
        return _strings(raw) == _strings(_dumps(pruned))
    except (TypeError, ValueError, RecursionError):
        return False


def _strings(raw: bytes) -> int:
    """How many strings a valid JSON document holds: its quotes that no escape precedes, halved.
    Removing each escaped backslash first leaves a backslash before a quote only where it escapes it."""
    if b"\\" not in raw:  # no escape at all: a plain count
        return raw.count(b'"') // 2
    bare = raw.replace(b"\\\\", b"")
    return (bare.count(b'"') - bare.count(b'\\"')) // 2


def _dumps(obj: Any) -> bytes:
    if _fast_dumps is not None:
        return _fast_dumps(obj)
    return json.dumps(obj, ensure_ascii=False, allow_nan=False).encode("utf-8")
