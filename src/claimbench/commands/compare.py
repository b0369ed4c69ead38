"""`claimbench compare A B`: SAME / FASTER / SLOWER / AMBIGUOUS per claim, for a CI job to gate on."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from claimbench.errors import EXIT_FAILED, EXIT_OK, UsageError
from claimbench.spec.safetext import plain


def register(sub) -> None:
    p = sub.add_parser("compare", help="two records or two result folders, claim by claim: SAME, FASTER, SLOWER, "
                       "AMBIGUOUS (intervals overlap), MISSING (a number gone), NEW, REFUSED (audit rejects a record)",
                       description="Compare run B against run A, so a CI job can gate on it (exit codes below; "
                       "AMBIGUOUS fails too with --strict).")
    p.add_argument("a", metavar="A", help="the reference: a record file, or a folder of records (e.g. results/)")
    p.add_argument("b", metavar="B", help="the new run: a record file, or a folder of records")
    p.add_argument("--threshold", type=float, default=None, metavar="FRACTION",
                   help="a change within this fraction is SAME (default 0.05)")
    p.add_argument("--strict", action="store_true", help="AMBIGUOUS fails too: an unsettled change is not a pass")
    p.add_argument("--format", choices=("table", "json"), default="table", help="table (default) or json")
    p.set_defaults(func=run)


def run(args) -> int:
    from claimbench.report.compare import DEFAULT_THRESHOLD, FAILING, Change, collect, compare, compare_files
    from claimbench.report.ingest import find_records

    threshold = DEFAULT_THRESHOLD if args.threshold is None else args.threshold
    if not 0 <= threshold < 1:
        raise UsageError(f"--threshold {args.threshold}: give a fraction from 0 to below 1 (0.05 is 5%)")
    a, b = Path(args.a), Path(args.b)
    for p in (a, b):
        if not p.exists():
            raise UsageError(f"{p}: no such file or folder")
    if a.is_file() and b.is_file():
        rows = [compare_files(a, b, threshold)]
    elif a.is_dir() and b.is_dir():
        rows = compare(collect(find_records([a])), collect(find_records([b])), threshold)
    else:
        raise UsageError("compare two record files, or two folders of records, not one of each")
    failing = set(FAILING) | ({Change.AMBIGUOUS} if args.strict else set())
    if args.format == "json":
        sys.stdout.write(json.dumps([r.to_json() for r in rows], indent=1) + "\n")
    else:
        sys.stdout.write(_table(rows))
        counts = {c: sum(r.change == c for r in rows) for c in Change}
        print("compare: " + ", ".join(f"{n} {c.value}" for c, n in counts.items() if n)
              + f" (threshold {threshold:g}; B against A)" if rows else "compare: no records in either")
    return EXIT_FAILED if any(r.change in failing for r in rows) else EXIT_OK


def _num(side, attr: str) -> str:
    v = getattr(side, attr) if side is not None else None
    return "-" if v is None else f"{v:.4g}"


def _interval(side) -> str:
    return "-" if side is None or side.ci_low is None else f"[{side.ci_low:.4g}, {side.ci_high:.4g}]"


def _table(rows) -> str:
    head = ("claim", "hardware", "change", "B/A", "A", "A 95% CI", "B", "B 95% CI", "note")
    body = [(r.claim_id, r.hardware, r.change.value, "-" if r.ratio is None else f"{r.ratio:.3f}",
             _num(r.a, "value"), _interval(r.a), _num(r.b, "value"), _interval(r.b), r.note) for r in rows]
    cells = [tuple(plain(str(c)) for c in row) for row in [head, *body]]  # record text reaches a terminal
    widths = [max(len(row[i]) for row in cells) for i in range(len(head) - 1)]
    return "".join("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1] + "\n" for row in cells)
