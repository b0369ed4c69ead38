"""Harness overhead per CPU claim against a bare `python -c "import torch"`, and the value's spread.

Overhead is a claim's wall time beyond the time spent warming up and timing kernel and baseline:
the CLI, the fork server's imports, the three side processes, correctness trials, null models,
census and reads, ceilings (cached after the first run). In the same run the benchmark times a bare
`import torch` and prints the ratio; the target is 1.0 or less. The spread is reported, not gated.

    python benchmarks/overhead.py [--runs 5] [CLAIM ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_claims() -> list[Path]:
    out = []
    for p in sorted((ROOT / "claims").glob("*.yaml")):
        if "device: cpu" in p.read_text():
            out.append(p)
    return out or [ROOT / "tests/fixtures/claims/valid/softmax-cpu.yaml"]


def run_once(claim: Path, results: Path) -> tuple[float, dict]:
    root = ROOT if claim.is_relative_to(ROOT / "claims") else ROOT / "tests/fixtures"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "claimbench", "--root", str(root), "run", str(claim),
                           "--results", str(results), "--format", "json", "--quiet", "--max-time-s", "2"],
                          capture_output=True, text=True)
    wall = time.perf_counter() - t0
    rows = json.loads(proc.stdout or "[]")
    rec = json.loads(Path(rows[0]["record"]).read_text()) if rows and rows[0].get("record") else {}
    return wall, rec


def bare_import_s(runs: int = 5) -> float:
    xs = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        xs.append(time.perf_counter() - t0)
    return statistics.median(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("claims", nargs="*")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    claims = [Path(c).resolve() for c in args.claims] or cpu_claims()
    bare = bare_import_s()
    print(f"bare `python -c 'import torch'`: {bare:.2f} s (median of 5)")
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp)
        print(f"{'claim':32} {'run':>3} {'wall s':>7} {'timed s':>7} {'overhead s':>10} {'value':>8} verdict")
        for claim in claims:
            values, overheads = [], []
            for i in range(args.runs):
                wall, rec = run_once(claim, results)
                proto = rec.get("protocol") or {}
                timed = float(proto.get("warmup_s") or 0) + float(proto.get("elapsed_s") or 0)
                overheads.append(wall - timed)
                if rec.get("value") is not None:
                    values.append(rec["value"])
                print(f"{claim.stem[:32]:32} {i + 1:>3} {wall:7.2f} {timed:7.2f} {wall - timed:10.2f} "
                      f"{rec.get('value') or float('nan'):8.4g} {rec.get('verdict')}")
            spread = (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else float("nan")
            warm = statistics.median(overheads[1:]) if len(overheads) > 1 else overheads[0]
            print(f"{claim.stem[:32]:32} overhead median {statistics.median(overheads):.2f} s, after the first run "
                  f"{warm:.2f} s = {warm / bare:.2f}x a bare torch import; value spread {spread * 100:.1f}% "
                  f"over {len(values)} runs")


if __name__ == "__main__":
    main()
