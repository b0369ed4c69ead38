"""`claimbench audit`: fail (exit 1) on any number or record that cannot be trusted. CI runs it."""

from __future__ import annotations

import time

from claimbench.commands.publish import add_paths, paths
from claimbench.errors import EXIT_FAILED, EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("audit", help="verify the list's numbers and every record; exit 1 on any problem",
                       description="Recompute every record's verdict from its samples, recompute what publish "
                       "would write, and compare with the list.")
    add_paths(p)
    p.add_argument("--allow-dirty", action="store_true", help="as publish --allow-dirty")
    p.add_argument("--max-per-entry", type=int, default=3, metavar="N", help="as publish --max-per-entry")
    p.add_argument("--no-cache", action="store_true", help="recompute every record; ignore results/.cache/")
    p.add_argument("--workers", type=int, default=2, help="processes for reading records (default 2)")
    p.add_argument("--base", metavar="REF", default=None,
                   help="hold committed records to the merge base of REF and HEAD, not to HEAD: a pull request's "
                   "CI passes its target branch (e.g. origin/main), so a record the pull request deleted or "
                   "rewrote is a problem")
    p.set_defaults(func=run, exit_fast=True)


def run(args) -> int:
    from claimbench.report.audit import audit_report

    root, list_path, results = paths(args)
    t0 = time.perf_counter()
    problems, checked = audit_report(root, list_path, results, allow_dirty=args.allow_dirty,
                                     max_per_entry=args.max_per_entry, workers=args.workers, cache=not args.no_cache,
                                     base=args.base)
    args.keep_until_exit = checked  # freeing 100,000 summaries costs a third of a second; the CLI exits instead
    n = len(checked)
    from claimbench.spec.safetext import terminal

    for p in problems:
        print(terminal(str(p)))
    print(f"audit: {len(problems)} problem{'s' if len(problems) != 1 else ''} in {list_path.name} and "
          f"{n} record{'s' if n != 1 else ''} ({time.perf_counter() - t0:.1f} s)")
    return EXIT_FAILED if problems else EXIT_OK
