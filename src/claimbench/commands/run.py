"""`claimbench run [PATHS...]`: run claims, write records, print the verdict table."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from claimbench.errors import EXIT_FAILED, EXIT_OK, UsageError
from claimbench.extras import require
from claimbench.gate.claimfiles import discover, named_claims
from claimbench.options import OPTIONS, parse
from claimbench.spec.project import find_root
from claimbench.spec.safetext import terminal


class _DeprecatedJson(argparse.Action):
    """`--json`, the spelling before every command took `--format`; works until 0.3, and says so."""

    def __call__(self, parser, namespace, values, option_string=None):  # noqa: PLR0917 (argparse.Action's signature)
        print("claimbench: --json is deprecated, use --format json", file=sys.stderr)
        namespace.format = "json"


def register(sub) -> None:
    p = sub.add_parser("run", help="run claims: verify, time, decide, and write result records")
    p.add_argument("paths", nargs="*", help="claim files, folders or claim ids (default: claims/)")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text: the outcomes as a table; json: as a JSON list")
    p.add_argument("--json", nargs=0, action=_DeprecatedJson, help=argparse.SUPPRESS)
    p.add_argument("--quiet", action="store_true", help="print no progress lines, only the table (or JSON)")
    groups = {"run": p, "CI": p.add_argument_group("CI")}
    for o in OPTIONS:  # the same table gives the pytest plugin its --claims-* options
        groups[o.group].add_argument("--" + o.name, **o.argparse_kwargs())
    p.set_defaults(func=run)


def run(args) -> int:
    from claimbench.runner import run_claims

    root = find_root(args.root, args.paths)
    named = named_claims(args.paths, root)
    opts, ci = parse(lambda dest: getattr(args, dest), root=root)
    paths = discover(named, root)
    if not paths:
        raise UsageError(f"no claim files found in {', '.join(named) or root / 'claims'}")
    require("run", "claimbench run")
    from claimbench.orchestrator.progress import make
    say = make(time.monotonic(), args.quiet)
    opts = dataclasses.replace(opts, progress=say)

    if args.sandbox in ("auto", "none"):  # said once, before any claim's code runs
        from claimbench.orchestrator.sandbox import choose
        box = choose(args.sandbox, cuda=False)  # "auto" and "none" always have an answer
        if box.kind == "landlock":
            print(f"claimbench: sandbox: Landlock ({box.why}): the claims' processes may write only their scratch "
                  "folder; they still see the machine and its network (README: What a run does not catch)",
                  file=sys.stderr)
        elif box.kind == "none":
            print(f"claimbench: no sandbox: {box.why}; the claims' code runs with your rights, and their numbers are "
                  "labelled 'no sandbox' (README: What a run does not catch)", file=sys.stderr)

    from claimbench.orchestrator.servers import dropped_binding
    if dropped_binding():  # a side may not bind its threads (machine/pinning.py): the orchestrator pins it
        print(f"claimbench: {', '.join(terminal(x) for x in dropped_binding())}: not passed to the claims' processes; "
              "each side is pinned to its cores by the run, and may not move its threads (README: How a run is isolated)",
              file=sys.stderr)

    def select(found, hw):
        from claimbench.ci.selection import select_for_ci
        return select_for_ci(ci, found, root, hw=hw, hardware_only=opts.hardware_only)

    try:
        hw, outcomes = run_claims(paths, root, opts, select=select)
    finally:
        getattr(say, "close", lambda: None)()
    if ci.summary:
        from claimbench.ci.summary import write_summary
        write_summary(ci.summary, hw, outcomes)
    if args.format == "json":
        def one(o) -> dict:
            return {"claim": o.claim_id, "status": o.status.value, "reason": o.reason, "value": o.value,
                    "ci": [o.ci_low, o.ci_high], "metric": o.metric, "claimed": o.claimed_value,
                    "hardware": o.hardware, "record": str(o.record_path) if o.record_path else None}
        # a sweep's other points nest under their claim: the claim's status is its own point's alone
        json.dump([{**one(o), "sweep": [{"point": p.point, **one(p)} for p in o.points]} for o in outcomes],
                  sys.stdout, indent=2)
        print()
    else:
        print(format_table(outcomes))
    failing = [o for o in outcomes if not o.status.ok and not (ci.timing == "report" and o.status.is_timing)]
    return EXIT_FAILED if failing else EXIT_OK


def format_table(outcomes) -> str:
    rows = [("claim", "hardware", "measured [95% CI]", "claimed", "verdict", "reason")]
    for o in (row for claim in outcomes for row in (claim, *claim.points)):
        if o.value is None:
            meas = "-"
        elif o.ci_low is None or o.ci_high is None:
            meas = f"{o.value:.4g} [no CI]"
        else:
            meas = f"{o.value:.4g} [{o.ci_low:.4g}, {o.ci_high:.4g}]"
        claimed = "-" if o.claimed_value is None else f"{o.metric} {o.claimed_value:g}"
        name = f"  at {o.point} (sweep)" if o.point else o.claim_id  # under its claim; never the claim's verdict
        rows.append((terminal(name), terminal(o.hardware[:28]), meas, claimed, o.status.value, terminal(o.reason)))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = []
    for r in rows:  # the whole reason: a cut one hides what to do ("... [95% CI 1.832, 3.")
        lines.append("  ".join(v.ljust(w) for v, w in zip(r[:5], widths)) + "  " + r[5])
    n = {s: sum(1 for o in outcomes if o.status.value == s) for s in {o.status.value for o in outcomes}}
    lines.append(", ".join(f"{v} {k}" for k, v in sorted(n.items())))
    return "\n".join(lines)
