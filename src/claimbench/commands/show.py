"""`claimbench show ID`: one claim, its policy status, and its provenance (records, list).

Everything printed from a claim or a record goes through `safetext.terminal`: a title cannot
carry an escape sequence or reorder the line it is on."""

from __future__ import annotations

from pathlib import Path

from claimbench.errors import EXIT_FAILED, EXIT_OK, UsageError
from claimbench.spec.project import find_root, load_listing


def register(sub) -> None:
    p = sub.add_parser("show", help="show a claim, its policy status and provenance; or one record")
    p.add_argument("id", nargs="?", help="claim id")
    p.add_argument("--record", default=None, metavar="PATH", help="print one record in readable form")
    p.add_argument("--results", default=None, metavar="DIR",
                   help="the records to show (default: results/, the committed records/ under it)")
    p.set_defaults(func=run)


def _memory_lines(claim) -> list[str]:
    """The verification's estimated peak memory at each measured point, or why there is none."""
    from claimbench.spec import expr, memory

    try:
        found = memory.estimates(claim)
    except expr.ExprError as e:
        return [f"  memory     cannot be estimated: {e}"]
    if not found:
        return ["  memory     not estimated: the claim declares no workload.memory"]
    return [f"  memory     {'' if e.point == 'params' else e.point + ': '}{e.summary()}" for e in found]


def run(args) -> int:
    from claimbench.gate.claimfiles import discover
    from claimbench.gate.gateall import gate_all  # here, not at import: every command's parser loads this module
    from claimbench.spec.safetext import terminal as t

    if args.record:
        from claimbench.report.trail import show_record
        print(show_record(Path(args.record)))
        return EXIT_OK
    if not args.id:
        raise UsageError("show needs a claim ID or --record PATH")
    root = find_root(args.root)
    listing = load_listing(root)
    results = gate_all(discover([], root), root, listing)
    match = [r for r in results if (r.claim and r.claim.id == args.id) or Path(r.path).stem == args.id]
    if not match:
        import difflib

        ids = sorted({r.claim.id if r.claim else Path(r.path).stem for r in results})
        near = difflib.get_close_matches(args.id, ids, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(near)}?" if near else f"; `claimbench list` shows the {len(ids)} there"
        raise UsageError(f"no claim with id {args.id!r} under {root / 'claims'}{hint}")
    r = match[0]
    lines = [f"claim {args.id}  ({r.path})"]
    if r.claim is not None:
        c = r.claim
        lines += [f"  title      {c.title}", f"  entry      {c.entry}",
                  f"  source     {c.source.kind}: {c.source.title} <{c.source.url}> at {c.source.locator}",
                  f"  hardware   {c.hardware.device} {', '.join(c.hardware.model)}"
                  + (f" cc {','.join(c.hardware.compute_capability)}" if c.hardware.compute_capability else "")
                  + (f" {c.hardware.sm_count} SMs" if c.hardware.sm_count else ""),
                  f"  workload   {c.workload.inputs} {c.workload.params}",
                  f"  precision  {c.precision.dtype}" + (f" (accumulate {c.precision.accumulate})" if c.precision.accumulate else ""),
                  f"  kernel     {c.kernel.name}: {c.kernel.impl}",
                  f"  baseline   {c.baseline.name}: {c.baseline.impl}",
                  f"  checked by {c.correctness.method} vs {c.correctness.reference}, {c.correctness.trials} trials",
                  f"  claimed    {c.claimed.metric} {c.claimed.value:g} (tolerance {c.claimed.tolerance:g})"]
        lines += _memory_lines(c)
    lines.append(f"  policy     {'passes' if r.ok else 'REJECTED'}")
    lines += [f"    {p}" for p in r.problems]
    print("\n".join(t(line) for line in lines))
    if r.claim is not None:
        from claimbench.report.trail import show_provenance

        results_dir = Path(args.results) if args.results else root / "results"
        print(show_provenance(root, r.claim.id, results_dir=results_dir))
    return EXIT_OK if r.ok else EXIT_FAILED
