"""Does a CPU claim publish the same number twice? Each CPU claim, N times in a row, through the CLI.

The list's promise is that the next person with the same hardware gets the number again, so the
figure is the spread of the published values, (max - min) / median, against a target of 5%: a
claim run five times either publishes values within 5% of each other or ends inconclusive, never
verified at different values. For each run: verdict, value, CI and its half-width, the published
value, and how busy the machine was while it ran (other processes' share of all cores, from
/proc/stat, our own child processes taken out; and what the record says, when the runner records
it). Printed, never asserted; on a shared machine say so next to any figure.

    python benchmarks/repeatability.py [--runs 5] [--repeat N] [--max-time-s S] [CLAIM ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_load import LoadMeter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def cpu_claims() -> list[Path]:
    return [p for p in sorted((ROOT / "claims").glob("*.yaml")) if "device: cpu" in p.read_text()]


def run_once(claim: Path, results: Path, extra: list[str]) -> tuple[dict, object]:
    cmd = [sys.executable, "-m", "claimbench", "--root", str(ROOT), "run", str(claim), "--results", str(results),
           "--format", "json", "--quiet", "--timing", "report", *extra]
    with LoadMeter() as meter:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    rows = json.loads(proc.stdout or "[]") if proc.stdout.strip().startswith("[") else []
    if not rows or not rows[0].get("record"):
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"verdict": "no record", "reason": tail}, meter.load
    return json.loads(Path(rows[0]["record"]).read_text()), meter.load


def fmt(x) -> str:
    return "-" if x is None else f"{x:.4g}"


def describe(rec: dict) -> str:
    v, lo, hi = rec.get("value"), rec.get("ci_low"), rec.get("ci_high")
    ci = f" [{fmt(lo)}, {fmt(hi)}]" if lo is not None else ""
    width = f" ±{(hi - lo) / 2 / abs(v):.1%}" if None not in (v, lo, hi) and v else ""
    pub = f", published {fmt(rec['published_value'])}" if rec.get("published_value") is not None else ""
    return f"{rec.get('verdict', '?'):12} {fmt(v)}{ci}{width}{pub}"


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / statistics.median(xs) if len(xs) > 1 else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("claims", nargs="*", help="claim files (default: every claims/*.yaml with device: cpu)")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=None, help="passed to claimbench run")
    ap.add_argument("--max-time-s", type=float, default=None, help="passed to claimbench run")
    args = ap.parse_args()
    claims = [Path(c).resolve() for c in args.claims] or cpu_claims()
    extra = ([f"--repeat={args.repeat}"] if args.repeat else []) + (
        [f"--max-time-s={args.max_time_s}"] if args.max_time_s else [])
    summary = []
    with tempfile.TemporaryDirectory(prefix="repeatability-") as tmp, LoadMeter() as whole:
        for claim in claims:
            recs, loads = [], []
            for i in range(args.runs):
                rec, load = run_once(claim, Path(tmp), extra)
                recs.append(rec)
                loads.append(load)
                said = ((rec.get("protocol") or {}).get("machine_load") or {}).get("other_cpu_fraction")
                said = f" (record: {said:.0%})" if isinstance(said, (int, float)) else ""
                why = f" - {rec.get('reason', '')[:160]}" if rec.get("verdict") != "verified" else ""
                print(f"{claim.stem} run {i + 1}: {describe(rec)}; others {load.other_fraction:.0%} of the cores"
                      f"{said} over {load.wall_s:.0f} s{why}", flush=True)
            published = [r["published_value"] for r in recs if r.get("published_value") is not None]
            values = [r["value"] for r in recs if r.get("value") is not None]
            others = [ld.other_fraction for ld in loads]
            verdicts = {v: sum(r.get("verdict") == v for r in recs) for v in dict.fromkeys(r.get("verdict") for r in recs)}
            met = "n/a" if len(published) < 2 else ("met" if spread(published) <= 0.05 else "NOT met")
            pub = (f"published {len(published)} of {len(recs)}: {min(published):.4g}-{max(published):.4g}, spread "
                   f"{spread(published):.1%} (target 5%: {met})") if published else f"published 0 of {len(recs)}"
            line = (f"{claim.stem}: {pub}; all values spread {spread(values):.1%}; verdicts "
                    f"{', '.join(f'{k} {n}' for k, n in verdicts.items())}; others {min(others):.0%}-{max(others):.0%} of the cores")
            summary.append(line)
    print()
    for line in summary:
        print(line)
    print(f"the whole benchmark: {whole.load}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
