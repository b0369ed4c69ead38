"""How long does one correctness trial's verification take at full size, and how much memory?

One trial's verification in the orchestrator is the comparison of an output with its float64
reference (`accuracy.compare`) plus the null models on that reference (`nullmodels.null_models`).
This times both for outputs of 2^20, 2^24 and 2^28 elements whose claim precision is float32,
bfloat16 or float8 (the output a kernel returns, decoded to float64, against a reference), with
tolerances of the kind the shipped claims state for that precision, and reports the peak host
memory (tracemalloc: numpy reports its allocations to it) as a multiple of the output's float64
size. The same run times the code of a baseline commit (default 8f7876c, before the blocked null
models and the vectorized rounding), loaded from git, at the sizes where it finishes in reasonable
time (2^20 and 2^24 by default), so the ratios are measured side by side, never quoted across runs.

Targets (issue 23): one trial at 2^28 elements in 5 s or less; peak memory 4x the output's
float64 size or less. Usage: python benchmarks/verify_scale.py [--sizes 20 24 28] [--old-sizes 20 24]
[--baseline 8f7876c]
"""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from claimbench.verify import accuracy, codec, nullmodels  # noqa: E402

# claim precision -> (the dtype the output is stored in, tolerances like the shipped claims')
CASES = {
    "float32": ("float32", SimpleNamespace(method="allclose", max_rel_l2=1e-5, rtol=1e-5, atol=1e-6)),
    "bfloat16": ("bfloat16", SimpleNamespace(method="allclose", max_rel_l2=8e-3, rtol=1.6e-2, atol=1e-3)),
    "float8_e4m3fn": ("bfloat16", SimpleNamespace(method="allclose", max_rel_l2=2e-2, rtol=6e-2, atol=2e-3)),
}


def _old_modules(commit: str) -> tuple[ModuleType, ModuleType]:
    """accuracy and nullmodels (with the codec they import) as they were at ``commit``, importable
    side by side with today's."""
    tmp = Path(tempfile.mkdtemp(prefix="verify-scale-"))
    pkg = tmp / "oldverify"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for name in ("codec", "accuracy", "nullmodels"):
        src = subprocess.run(["git", "-C", str(REPO), "show", f"{commit}:src/claimbench/verify/{name}.py"],
                             capture_output=True, text=True, check=True).stdout
        (pkg / f"{name}.py").write_text(src.replace("from claimbench.verify", "from oldverify"))
    sys.path.insert(0, str(tmp))
    return importlib.import_module("oldverify.accuracy"), importlib.import_module("oldverify.nullmodels")


def _one_trial(out: np.ndarray, ref: np.ndarray, corr, claim_dtype: str, acc_mod: ModuleType,
               nulls_mod: ModuleType) -> tuple[float, float, dict]:
    """(seconds, peak bytes above the inputs, the null models' verdicts) of one trial's checks."""
    tracemalloc.start()
    tracemalloc.reset_peak()
    t0 = time.perf_counter()
    row = acc_mod.compare(out, ref, corr, out_dtype="x")
    nm = nulls_mod.null_models([ref], corr, claim_dtype)
    dt = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert row["passed"], row
    return dt, peak, nm


def _data(n: int, stored: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ref = rng.standard_normal((n >> 12, 1 << 12))
    out = codec.round_to(ref, stored)  # what a correct kernel returns, decoded to float64
    return out, ref


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 24, 28], help="log2 of the output's elements")
    ap.add_argument("--old-sizes", type=int, nargs="*", default=[20, 24], help="sizes to time the baseline at")
    ap.add_argument("--baseline", default="8f7876c", help="the commit whose code is timed beside today's")
    args = ap.parse_args()
    old_acc, old_nulls = _old_modules(args.baseline) if args.old_sizes else (None, None)
    print(f"{'size':>5} {'precision':<14} {'trial s':>8} {'peak/out':>9} {'baseline s':>11} {'ratio':>7}  null models")
    worst_time, worst_mem = {}, {}
    for k in args.sizes:
        n = 1 << k
        for claim_dtype, (stored, corr) in CASES.items():
            out, ref = _data(n, stored, k)
            t, peak, nm = _one_trial(out, ref, corr, claim_dtype, accuracy, nullmodels)
            base = ""
            if old_nulls is not None and k in args.old_sizes:
                tb, _, nm_old = _one_trial(out, ref, corr, claim_dtype, old_acc, old_nulls)
                assert nm_old == nm, (nm_old, nm)
                base = f"{tb:>11.2f} {tb / t:>6.1f}x"
            ratio = peak / (8 * n)
            worst_time[k], worst_mem[k] = max(worst_time.get(k, 0.0), t), max(worst_mem.get(k, 0.0), ratio)
            print(f"2^{k:<3} {claim_dtype:<14} {t:>8.2f} {ratio:>8.2f}x {base or '-':>19}  {nm}", flush=True)
            del out, ref
    for k in args.sizes:
        print(f"2^{k}: slowest trial {worst_time[k]:.2f} s, peak memory {worst_mem[k]:.2f}x the output's float64 size "
              "(beyond the output and reference themselves)")
    if 28 in worst_time:
        ok = worst_time[28] <= 5.0 and worst_mem[28] <= 4.0
        print(f"targets at 2^28 (<= 5 s, <= 4x): {'met' if ok else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
