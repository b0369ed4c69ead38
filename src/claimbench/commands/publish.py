"""`claimbench publish`: write verified, current numbers into the list; reads records, runs nothing."""

from __future__ import annotations

import difflib
import sys
from pathlib import Path

from claimbench.errors import EXIT_FAILED, EXIT_OK, UsageError
from claimbench.orchestrator.lock import project_writes
from claimbench.spec.project import find_root


def add_paths(p) -> None:
    """--list and --results, shared by publish, audit, table and site."""
    p.add_argument("--list", dest="list_path", default=None, help="the list (default: LIST.md at the project root)")
    p.add_argument("--results", default=None, help="the results folder (default: results/ at the project root)")


def paths(args) -> tuple[Path, Path, Path]:
    root = find_root(args.root)
    list_path = Path(args.list_path) if getattr(args, "list_path", None) else root / "LIST.md"
    results = Path(args.results) if getattr(args, "results", None) else root / "results"
    if not list_path.is_file():
        raise UsageError(f"{list_path}: no such list file")
    if getattr(args, "results", None) and not results.is_dir():
        # a mistyped folder would read as "no records": every number would come off the list
        raise UsageError(f"--results {args.results}: no such folder; name the results folder (default: results/)")
    return root, list_path, results


def register(sub) -> None:
    p = sub.add_parser("publish", help="write verified, current numbers into the list",
                       description="For each list entry with a verified, current record, write the number "
                       "between the entry's claimbench markers; take stale and superseded numbers off, saying why.")
    add_paths(p)
    p.add_argument("--allow-dirty", action="store_true",
                   help="let records from a dirty git tree count (they are labelled 'dirty')")
    p.add_argument("--max-per-entry", type=int, default=3, metavar="N", help="numbers shown per entry (default 3)")
    p.add_argument("--dry-run", action="store_true", help="print the report and the diff; write nothing")
    p.set_defaults(func=run, exit_fast=True)


def run(args) -> int:
    from claimbench.report.publish import publish

    if args.max_per_entry < 1:
        raise UsageError(f"--max-per-entry {args.max_per_entry}: must be 1 or more (numbers shown per entry)")
    root, list_path, results = paths(args)
    from claimbench.store.provenance import refuse_tracked_links
    refuse_tracked_links(root, results, "publish")
    with project_writes(root, say=lambda line: print(line, file=sys.stderr)):
        plan = publish(root, list_path, results, allow_dirty=args.allow_dirty,
                       max_per_entry=args.max_per_entry, dry_run=args.dry_run)
    for line in plan.lines(dry_run=args.dry_run):
        print(line, file=sys.stderr if line.startswith("  !") else sys.stdout)
    if args.dry_run and plan.changed:
        from claimbench.spec.safetext import terminal

        sys.stdout.writelines(terminal(line.rstrip("\n")) + "\n" for line in difflib.unified_diff(
            plan.text.splitlines(True), plan.new_text.splitlines(True), str(list_path), f"{list_path} (published)"))
    return EXIT_FAILED if plan.failed else EXIT_OK
