"""Timing fidelity on CPU: the kernel's median as the orchestrator measures it from outside, against
`torch.utils.benchmark.Timer.blocked_autorange` (its median) in one process, on the same inputs.

The orchestrator brackets each sample with its own clock (a message to the kernel's process, the
calls, a message back) and subtracts a null call measured in the same run. The ratio shows what
that costs in fidelity; it is printed, never asserted.

    python benchmarks/fidelity_cpu.py [--runs 3] [CLAIM ...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_claims() -> list[Path]:
    return [p for p in sorted((ROOT / "claims").glob("*.yaml")) if "device: cpu" in p.read_text()]


def outside_median_us(claim: Path, results: Path) -> tuple[float, dict]:
    proc = subprocess.run([sys.executable, "-m", "claimbench", "--root", str(ROOT), "run", str(claim),
                           "--results", str(results), "--format", "json", "--quiet", "--max-time-s", "3"],
                          capture_output=True, text=True)
    rows = json.loads(proc.stdout or "[]")
    rec = json.loads(Path(rows[0]["record"]).read_text())
    return float(rec["kernel"]["median_us"]), rec


def inside_median_us(claim: Path, threads: int) -> float:
    """blocked_autorange in a fresh process, on inputs made with the claim's own make_inputs."""
    code = f"""
import sys, yaml, torch
from pathlib import Path
from torch.utils.benchmark import Timer
sys.path.insert(0, {str(ROOT)!r})
from claimbench.side.loader import load
c = yaml.safe_load(Path({str(claim)!r}).read_text())
torch.set_num_threads({threads})
mk = load(Path({str(ROOT)!r}), c["workload"]["inputs"])
fn = load(Path({str(ROOT)!r}), c["kernel"]["impl"])
ins = mk(seed=12345, device="cpu", dtype=c["precision"].get("check_dtype") or c["precision"]["dtype"], **c["workload"]["params"])
ins = tuple(ins) if isinstance(ins, (tuple, list)) else (ins,)
prep = c["kernel"].get("prepare")
ops = load(Path({str(ROOT)!r}), prep)(*ins) if prep else ins
ops = tuple(ops) if isinstance(ops, (tuple, list)) else (ops,)
m = Timer(stmt="fn(*ops)", globals={{"fn": fn, "ops": ops}}, num_threads={threads}).blocked_autorange(min_run_time=3.0)
print(m.median * 1e6)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("claims", nargs="*")
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    claims = [Path(c).resolve() for c in args.claims] or cpu_claims()
    print(f"{'claim':32} {'outside us':>11} {'Timer us':>9} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as tmp:
        for claim in claims:
            outs, ins = [], []
            for _ in range(args.runs):
                med, rec = outside_median_us(claim, Path(tmp))
                outs.append(med)
                threads = int((rec.get("protocol") or {}).get("torch_threads") or 1)
                ins.append(inside_median_us(claim, threads))
            o, i = statistics.median(outs), statistics.median(ins)
            print(f"{claim.stem[:32]:32} {o:11.1f} {i:9.1f} {o / i:6.3f}   (runs: {', '.join(f'{x:.0f}' for x in outs)} "
                  f"vs {', '.join(f'{x:.0f}' for x in ins)})")


if __name__ == "__main__":
    main()
