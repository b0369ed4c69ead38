"""`claimbench list`: the claims as a table."""

from __future__ import annotations

from claimbench.commands.check import gather
from claimbench.errors import EXIT_OK


def register(sub) -> None:
    p = sub.add_parser("list", help="list claims: id, entry, hardware, precision, metric and value")
    p.add_argument("paths", nargs="*", help="claim files, folders or claim ids (default: claims/)")
    p.set_defaults(func=run, list_path=None)


def run(args) -> int:
    _, results = gather(args)
    rows: list[tuple[str, ...]] = [("id", "entry", "hardware", "precision", "metric", "value", "policy")]
    for r in results:
        c = r.claim
        if c is None:
            rows.append((r.path, "-", "-", "-", "-", "-", "rejected"))
            continue
        hw = c.hardware.device + (":" + "|".join(c.hardware.model) if c.hardware.model != ["*"] else "")
        rows.append((c.id, c.entry, hw, c.precision.dtype, c.claimed.metric, f"{c.claimed.value:g}",
                     "ok" if r.ok else "rejected"))
    from claimbench.spec.safetext import plain

    rows = [tuple(plain(str(v)) for v in row) for row in rows]  # claim text reaches a terminal
    widths = [min(48, max(len(row[i]) for row in rows)) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(v[:w].ljust(w) for v, w in zip(row, widths)).rstrip())
    return EXIT_OK
