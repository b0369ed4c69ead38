"""`claimbench schema`: write the JSON Schemas (draft-07) under schema/: the claim's for editors, the
record's and the index line's for tools that read `results/` without claimbench."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from claimbench.errors import EXIT_OK
from claimbench.spec.project import find_root


def _claim() -> dict[str, Any]:
    from claimbench.spec.claim import json_schema
    return json_schema()


def _record() -> dict[str, Any]:
    from claimbench.store.schemas import record_schema
    return record_schema()


def _index() -> dict[str, Any]:
    from claimbench.store.schemas import index_line_schema
    return index_line_schema()


# kind -> (file under schema/, the schema)
KINDS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "claim": ("claim.schema.json", _claim),
    "record": ("record.schema.json", _record),
    "index": ("index-line.schema.json", _index),
}


def register(sub) -> None:
    p = sub.add_parser("schema", help="write the JSON Schemas (draft-07) of claims, records and index lines")
    p.add_argument("--kind", choices=tuple(KINDS), default=None,
                   help="with --out or --stdout, the one schema to write (default: claim); "
                        "without them every kind is written under schema/")
    p.add_argument("--out", default=None, metavar="PATH", help="write the one --kind schema to PATH")
    p.add_argument("--stdout", action="store_true", help="print the one --kind schema instead of writing a file")
    p.set_defaults(func=run)


def render(kind: str = "claim") -> str:
    return json.dumps(KINDS[kind][1](), indent=2, sort_keys=True) + "\n"


def run(args) -> int:
    if args.stdout or args.out:
        text = render(args.kind or "claim")
        if args.stdout:
            print(text, end="")
        else:
            _write(Path(args.out), text)
        return EXIT_OK
    folder = find_root(args.root) / "schema"
    for kind in ([args.kind] if args.kind else KINDS):
        _write(folder / KINDS[kind][0], render(kind))
    return EXIT_OK


def _write(out: Path, text: str) -> None:
    """Write only when the text changed, so a rerun leaves the file (and its mtime) alone."""
    try:
        if out.read_text(encoding="utf-8") == text:
            print(f"unchanged {out}")
            return
    except (FileNotFoundError, UnicodeDecodeError):
        pass
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
