"""`claimbench table`: all records as one table (md, csv or json); filter, or compare two GPUs."""

from __future__ import annotations

import sys
from pathlib import Path

from claimbench.errors import EXIT_OK
from claimbench.spec.project import find_root
from claimbench.stats.status import Status


def register(sub) -> None:
    p = sub.add_parser("table", help="all records as one table; filter by claim, hardware, verdict")
    p.add_argument("--results", default=None, help="the results folder (default: results/ at the project root)")
    p.add_argument("--format", choices=("md", "csv", "json"), default="md",
                   help="md: a Markdown table (default); csv or json for other tools")
    p.add_argument("--claim", default=None, help="claim id or glob")
    p.add_argument("--hardware", default=None, help="hardware slug or name, or a glob (e.g. '*h200*')")
    p.add_argument("--verdict", default=None, choices=[s.value for s in Status], metavar="VERDICT",
                   help="one of " + ", ".join(s.value for s in Status))
    p.add_argument("--compare", nargs=2, metavar=("HW_A", "HW_B"), default=None,
                   help="latest measured record per claim on two GPUs, side by side")
    p.set_defaults(func=run, exit_fast=True)


def run(args) -> int:
    from claimbench.extras import require

    require("table", "claimbench table")
    from claimbench.report.table import compare, records_table, render

    root = find_root(args.root)
    results = Path(args.results) if args.results else root / "results"
    from claimbench.report.publish import shown_path

    df = records_table(results, claim=args.claim, hardware=args.hardware, verdict=args.verdict,
                       shown=shown_path(results, root))
    if args.compare:
        df = compare(df, *args.compare)
    sys.stdout.write(render(df, args.format))
    return EXIT_OK
