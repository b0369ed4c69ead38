"""The spread of fresh ceiling measurements: does the physics floor stand on something stable?

Each measurement runs in a fresh process through `load_or_measure` with an empty cache folder,
exactly as the runner's kernel-free ceilings process does on a new machine (bandwidth over 8x the
last-level cache, the float32 matrix rate: what a CPU claim needs). Variants are interleaved, so
"before" and "after" see the same neighbours:

    python benchmarks/ceilings_spread.py --runs 5 --variant before=/path/to/old/src --variant after=src

For each variant and ceiling: the values, their spread (max - min) / max, the seconds each
measurement took, and how busy the machine was. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine_load import LoadMeter  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PROBE = """
import json, sys, time
from pathlib import Path
from claimbench.machine.ceilings import load_or_measure
from claimbench.machine.detect import detect
hw = detect(Path(sys.argv[2]), with_gpu=False)
t0 = time.perf_counter()
c = load_or_measure(Path(sys.argv[1]), hw, ("float32",))
print(json.dumps({"seconds": time.perf_counter() - t0, "ceilings": c.to_dict()}))
"""


def measure(src: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="ceilings-") as cache, LoadMeter() as meter:
        out = subprocess.run([sys.executable, "-c", PROBE, cache, str(ROOT)], capture_output=True, text=True,
                             env={"PYTHONPATH": str(src), "PATH": "/usr/bin:/bin", "HOME": cache}, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    got["load"] = meter.load
    return got


def spread(xs: list[float]) -> float:
    return (max(xs) - min(xs)) / max(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=SRC",
                    help="a claimbench source folder to measure with (default: this tree's src)")
    args = ap.parse_args()
    variants = dict(v.split("=", 1) for v in args.variant) or {"this tree": str(ROOT / "src")}
    got: dict[str, list[dict]] = {name: [] for name in variants}
    for i in range(args.runs):
        for name, src in variants.items():
            m = measure(Path(src).resolve())
            c = m["ceilings"]
            got[name].append(m)
            extra = "".join(f", {k} spread {v:.1%}" for k, v in (c.get("spread") or {}).items())
            print(f"{name} #{i + 1}: bandwidth {c['bandwidth_gbps']:.4g} GB/s, float32 "
                  f"{c['matrix_tflops'].get('float32') or 0:.4g} TFLOP/s{extra}; {m['seconds']:.1f} s; {m['load']}",
                  flush=True)
    print()
    for name, ms in got.items():
        bw = [m["ceilings"]["bandwidth_gbps"] for m in ms]
        fp = [m["ceilings"]["matrix_tflops"].get("float32") or 0 for m in ms]
        secs = [m["seconds"] for m in ms]
        others = [m["load"].other_fraction for m in ms]
        print(f"{name}: bandwidth {min(bw):.4g}-{max(bw):.4g} GB/s (spread {spread(bw):.1%}), "
              f"float32 {min(fp):.4g}-{max(fp):.4g} TFLOP/s (spread {spread(fp):.1%}); "
              f"{min(secs):.1f}-{max(secs):.1f} s each; other processes {min(others):.0%}-{max(others):.0%} of the cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
