"""Standalone targets for the external tools: `ncu` and `compute-sanitizer` launch this file.

    python3 scripts/gpucheck/drivers.py fidelity --device cuda --calls 6 tiny,softmax,gemm,attention
    python3 scripts/gpucheck/drivers.py sanitize --device cuda scan,streamk

Each kernel is called `calls` times (fidelity) or once (sanitize), with a synchronize after
every call; a line `DRIVER <name> ok|FAIL ...` per kernel tells the caller which ones finished,
since a tool may be killed at its time limit part-way.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _p in (str(ROOT), str(ROOT / "scripts")):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def _sync(device: str) -> None:
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def fidelity(names: list[str], device: str, calls: int) -> int:
    from gpucheck.workloads import Missing, build, by_name
    bad = 0
    for w in by_name(names):
        t0 = time.monotonic()
        try:
            fn, info = build(w, device)
            for _ in range(calls):
                out = fn()
                _sync(device)
                del out
        except Missing as e:
            print(f"DRIVER {w.name} SKIP {e}", flush=True)
            continue
        except Exception as e:  # report and go on: the other kernels still count
            bad += 1
            print(f"DRIVER {w.name} FAIL {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        print(f"DRIVER {w.name} ok {calls} calls {info['params']} in {time.monotonic() - t0:.1f} s", flush=True)
    return 1 if bad else 0


def sanitize(names: list[str], device: str) -> int:
    from gpucheck.workloads import SANITIZE
    bad = 0
    for name in names:
        t0 = time.monotonic()
        try:
            fn, check = SANITIZE[name](device)
            out = fn()
            _sync(device)
            ok, why = check(out)
        except Exception as e:
            ok, why = False, f"{type(e).__name__}: {str(e)[:200]}"
        bad += not ok
        print(f"DRIVER {name} {'ok' if ok else 'FAIL'} {why} in {time.monotonic() - t0:.1f} s", flush=True)
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=("fidelity", "sanitize"))
    ap.add_argument("names", help="comma-separated workload names")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--calls", type=int, default=6)
    a = ap.parse_args(argv)
    names = [n for n in a.names.split(",") if n]
    return fidelity(names, a.device, a.calls) if a.what == "fidelity" else sanitize(names, a.device)


if __name__ == "__main__":
    sys.exit(main())
