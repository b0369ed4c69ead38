"""`claimbench check [PATHS...]`: the policy gate. No GPU imports; answers in well under a second."""

from __future__ import annotations

import json
import sys

from claimbench.errors import EXIT_FAILED, EXIT_OK, UsageError
from claimbench.spec.project import find_root, load_listing

# The gate's modules load in `gather`, not here: every command's parser is built at start-up, and
# the rules and the claim model cost about 0.1 s that `audit` or `publish` never needs.


def register(sub) -> None:
    p = sub.add_parser("check", help="check claim files against the schema and the source policy")
    p.add_argument("paths", nargs="*", help="claim files, folders or claim ids (default: claims/)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: one line per problem (default); json: every claim and its problems")
    p.add_argument("--list", dest="list_path", default=None, help="the list entries must name (default: LIST.md)")
    p.set_defaults(func=run)


def gather(args):
    from claimbench.gate.claimfiles import find_claims, named_claims
    from claimbench.gate.gateall import gate_all
    from claimbench.gate.policy import CheckResult

    root = find_root(args.root, args.paths)
    paths, unreadable = find_claims(named_claims(args.paths, root), root)  # a broken link is a located problem
    if not paths and not unreadable:
        if args.paths:
            raise UsageError(f"no claim files (*.yaml) found in {', '.join(args.paths)}")
        hint = ("" if (root / "claims").is_dir() else
                "; is this a claimbench project? run it from the project's folder or name it with "
                "`claimbench --root DIR " + args.command + "`")
        raise UsageError(f"no claim files (*.yaml) found in {root / 'claims'}{hint}")
    listing = load_listing(root, getattr(args, "list_path", None))
    return root, gate_all(paths, root, listing) + [CheckResult(p.path, None, (p,)) for p in unreadable]


def run(args) -> int:
    root, results = gather(args)
    bad = [r for r in results if not r.ok]
    if args.format == "json":
        json.dump({"checked": len(results), "rejected": len(bad),
                   "claims": [{"path": r.path, "id": r.claim.id if r.claim else None, "ok": r.ok,
                               "problems": [p.to_dict() for p in r.problems],
                               "notes": [n.to_dict() for n in r.notes]} for r in results]},
                  sys.stdout, indent=2)
        print()
    else:
        from claimbench.spec.safetext import terminal

        for r in bad:
            for p in r.problems:
                print(terminal(str(p)))
        for r in results:  # allowed, but a reviewer reads why
            for n in r.notes:
                print(terminal(str(n)))
        print(f"{len(results)} claim{'s' if len(results) != 1 else ''} checked: "
              f"{len(results) - len(bad)} passed, {len(bad)} rejected")
    return EXIT_FAILED if bad else EXIT_OK
