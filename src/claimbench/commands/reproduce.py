"""`claimbench reproduce RECORD`: rerun the claim of one record at the record's commit, compare."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from claimbench.errors import EXIT_FAILED, EXIT_OK, UsageError
from claimbench.extras import require
from claimbench.spec.project import find_root
from claimbench.spec.safetext import terminal


def register(sub) -> None:
    p = sub.add_parser(
        "reproduce", help="rerun one record's claim at the record's commit and compare the verdicts",
        description="Check the record's git commit out into a temporary worktree (your checkout is not "
                    "touched), run its claim there with the flags the record was made with, and compare "
                    "the new verdict and 95% interval with the record's (on another machine of the claim's "
                    "kind, the verdicts alone).")
    p.add_argument("record", metavar="RECORD", help="a record file (results/records/<claim>/<file>.json)")
    p.add_argument("--results", default=None, metavar="DIR",
                   help="where the new record goes (default: results/runs/, git-ignored)")
    p.add_argument("--timeout-s", type=float, default=None, metavar="S",
                   help="time limit for the rerun, each process (default: from the claim's estimated cost, as `run`)")
    p.add_argument("--quiet", action="store_true", help="print no progress lines, only the comparison")
    p.set_defaults(func=run)


def run(args) -> int:
    from claimbench.report.publish import shown_path
    from claimbench.reproduce import rerun
    from claimbench.store.recipe import recipe
    from claimbench.store.record import load_record

    path = Path(args.record)
    if not path.is_file():
        raise UsageError(f"{args.record}: no such record file")
    rec = load_record(path)
    root = find_root(args.root, [args.record])
    results = Path(args.results) if args.results else root / "results" / "runs"
    steps = recipe(rec, shown_path(path, root))
    print(terminal(f"reproducing {rec.claim_id} from {steps.record}"))
    for line in steps.lines()[:-1]:
        print(terminal(f"  {line}"))
    t0 = time.monotonic()
    say = None if args.quiet else (lambda msg: print(terminal(f"[{time.monotonic() - t0:7.1f}s] {msg}"), file=sys.stderr, flush=True))
    require("run", "claimbench reproduce")
    result = rerun(rec, root, results, timeout_s=args.timeout_s, progress=say)
    for line in result.lines(str(rec.claimed.get("metric", "value"))):
        print(terminal(line))
    return EXIT_OK if result.reproduced else EXIT_FAILED
