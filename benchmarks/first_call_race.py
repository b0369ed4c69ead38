"""How often is a forked process's first two-thread math op wrong, with and without the warm-up?

A process imports torch and forks children, as the fork server does. Each child sets two torch
threads and, first thing, runs one elementwise op on a 64 x 250 tensor (large enough to split
across the two threads), then compares it with numpy's float64 answer. With ``--warm child``
the child first calls `claimbench.side.warmup.warm_math_libraries`, as every side does at load;
with ``--warm none`` it does not; ``--warm mm`` runs a tiny matmul in the parent before forking
(which made it worse). A child is "bad" when any row's relative L2 error is above 1e-6 (float32)
or 1e-13 (float64): the honest float32 error here is about 1e-7.

Usage: python benchmarks/first_call_race.py [--forks 1000] [--ops exp,log,tanh,sqrt]
[--dtypes float32,float64] [--warm none,child,mm]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def count_bad(forks: int, op: str, dtype: str, warm: str) -> int:
    """Children of this process whose first threaded ``op`` was wrong; the parent never calls
    torch math before forking (unless ``warm == "mm"``), so each child meets the library cold."""
    import torch

    rng = np.random.default_rng(1)
    x64 = rng.uniform(0.1, 3.0, (64, 250))
    ref = getattr(np, op)(x64)
    x = x64.astype(dtype)
    tol = 1e-6 if dtype == "float32" else 1e-13
    if warm == "mm":
        torch.mm(torch.ones(2, 2), torch.ones(2, 2))
    bad = 0
    for _ in range(forks):
        pid = os.fork()
        if pid == 0:
            torch.set_num_threads(2)
            if warm == "child":
                from claimbench.side.warmup import warm_math_libraries
                warm_math_libraries()
            out = getattr(torch, op)(torch.from_numpy(x)).double().numpy()
            err = np.linalg.norm(out - ref, axis=1) / np.linalg.norm(ref, axis=1)
            os._exit(1 if float(err.max()) > tol else 0)
        _, status = os.waitpid(pid, 0)
        bad += os.waitstatus_to_exitcode(status) != 0
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--forks", type=int, default=1000)
    ap.add_argument("--ops", default="exp,log,tanh,sqrt")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--warm", default="none,child")
    a = ap.parse_args()
    print(f"{'op':6} {'dtype':8} {'warm':6} {'bad':>6} {'forks':>6} {'s':>6}")
    for warm in a.warm.split(","):
        for op in a.ops.split(","):
            for dtype in a.dtypes.split(","):
                pid = os.fork()  # a fresh parent per row, so "mm" in one row leaves the next cold
                if pid == 0:
                    t0 = time.perf_counter()
                    bad = count_bad(a.forks, op, dtype, warm)
                    print(f"{op:6} {dtype:8} {warm:6} {bad:6d} {a.forks:6d} {time.perf_counter() - t0:6.1f}", flush=True)
                    os._exit(0)
                os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
