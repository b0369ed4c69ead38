"""`claimbench schema`: write schema/claim.schema.json (draft-07) for editors."""

from __future__ import annotations

import json
from pathlib import Path

from claimbench.errors import EXIT_OK
from claimbench.spec.claim import json_schema
from claimbench.spec.project import find_root


def register(sub) -> None:
    p = sub.add_parser("schema", help="write the claim JSON Schema (draft-07) for editors")
    p.add_argument("--out", default=None, metavar="PATH", help="default: schema/claim.schema.json under the project root")
    p.add_argument("--stdout", action="store_true", help="print the schema instead of writing the file")
    p.set_defaults(func=run)


def render() -> str:
    return json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"


def run(args) -> int:
    text = render()
    if args.stdout:
        print(text, end="")
        return EXIT_OK
    out = Path(args.out) if args.out else find_root(args.root) / "schema" / "claim.schema.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    print(f"wrote {out}")
    return EXIT_OK
