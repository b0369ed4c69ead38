"""`claimbench ingest [PATH...]`: check records made elsewhere and copy the good ones into results/records."""

from __future__ import annotations

import sys
from pathlib import Path

from claimbench.errors import EXIT_FAILED, EXIT_OK
from claimbench.orchestrator.lock import project_writes
from claimbench.spec.project import find_root
from claimbench.spec.safetext import terminal


def register(sub) -> None:
    p = sub.add_parser("ingest", help="check records from runs or fleet artifacts; copy the good ones into results/records",
                       description="Check every record under PATH (schema; its commit exists here; the claim and "
                       "source hashes match that commit's files; the verdict recomputes) and copy the good ones "
                       "into results/records under their own names.")
    p.add_argument("paths", nargs="*", help="record files, results folders or unpacked artifacts (default: results/runs)")
    p.add_argument("--results", default=None, help="the store to copy into (default: results/ at the project root)")
    p.add_argument("--dry-run", action="store_true", help="check and report; copy nothing")
    p.add_argument("--skipped", action="store_true",
                   help="take `skipped` records too (correctness checked off the claim's hardware, no number); "
                        "by default they are checked and left where they are")
    p.set_defaults(func=run)


def run(args) -> int:
    from claimbench.report.ingest import ingest

    root = find_root(args.root)  # the project in the cwd: artifacts may be unpacked anywhere
    sources = [Path(p) for p in args.paths] or [root / "results" / "runs"]
    results = Path(args.results) if args.results else root / "results"
    from claimbench.store.provenance import refuse_tracked_links
    refuse_tracked_links(root, results, "ingest")
    with project_writes(root, say=lambda line: print(line, file=sys.stderr)):
        report = ingest(root, sources, results, dry_run=args.dry_run, skipped=args.skipped)
    verb = "would ingest" if args.dry_run else "ingested"
    for _src, dest in report.ingested:
        print(terminal(f"{verb} {dest}"))
    for p in report.refused:
        print(terminal(str(p)), file=sys.stderr)
    done = "to ingest (dry run)" if args.dry_run else "ingested"
    left = f", {len(report.left)} skipped left where they are (no number; --skipped takes them)" if report.left else ""
    print(f"ingest: {len(report.ingested)} {done}, {len(report.present)} already present, "
          f"{len(report.refused)} refused{left}")
    return EXIT_OK if report.ok else EXIT_FAILED
