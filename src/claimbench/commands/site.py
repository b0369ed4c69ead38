"""`claimbench site`: a static HTML site (no server, no JavaScript) of the list, claims and records."""

from __future__ import annotations

from pathlib import Path

from claimbench.commands.publish import add_paths, paths
from claimbench.errors import EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("site", help="build a static HTML site: the list, one page per claim, rooflines")
    add_paths(p)
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default: results/site)")
    p.add_argument("--records-url", default=None, metavar="URL",
                   help="link records under this http(s) base URL instead of copying them into the site")
    p.set_defaults(func=run)


def run(args) -> int:
    from claimbench.extras import require

    require("site", "claimbench site")
    from claimbench.report.site import build_site

    root, list_path, results = paths(args)
    from claimbench.store.provenance import refuse_tracked_links
    refuse_tracked_links(root, results, "site")
    out = Path(args.out) if args.out else results / "site"
    index = build_site(root, out, list_path=list_path, results_dir=results, records_url=args.records_url)
    print(f"site written: {index}")
    return EXIT_OK
