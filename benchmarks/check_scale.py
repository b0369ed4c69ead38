"""How fast is `claimbench check`? 10,000 generated claims, then the shipped claims/.

Targets (issue 2): 10,000 claims in <= 10 s on the 2-core dev machine; the shipped claims in
<= 0.5 s wall. Wall time of the CLI as a subprocess, so interpreter start and imports count.
Each is timed cold (an empty user cache folder: every kernel file parsed) and warm (the same
folder again: the static rules' facts read from gate/facts.py's cache), best of --repeat runs.
Usage: python benchmarks/check_scale.py [--claims 10000] [--kernel-files 100] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE_TASK = REPO / "tests" / "fixtures" / "kernels" / "softmax_cpu.py"
FIXTURE_KERNEL = REPO / "tests" / "fixtures" / "kernels" / "softmax_cpu_kernel.py"

LIST = """# Bench list

## Kernel optimization

- Online Normalizer Calculation for Softmax - one pass for max and sum.
- Stream-K - split the k-loop across persistent blocks.
"""

CLAIM = """id: {id}
title: Generated claim {i}
entry: {entry}
source:
  kind: implementer-report
  title: claimbench benchmark
  url: https://arxiv.org/abs/1805.02867
  locator: Section 3
hardware:
  device: {device}
  model: ["{model}"]
workload:
  inputs: kernels/{kfile}.py:make_inputs
  params: {{rows: {rows}, cols: 1000}}
  check_params: [{{rows: 3, cols: 17}}, {{rows: 1, cols: 1}}]
  flops: "5 * rows * cols"
  bytes: "2 * rows * cols * 4"
  memory: {{operands_bytes: "rows * cols * itemsize", output_elements: "rows * cols", reference_bytes: "rows * cols * 8"}}
precision:
  dtype: float32
kernel:
  name: decomposed softmax
  impl: kernels/{kfile}_kernel.py:online_softmax
baseline:
  name: torch.softmax
  impl: kernels/{kfile}.py:torch_softmax
correctness:
  method: allclose
  reference: kernels/{kfile}.py:reference_fp64
  max_rel_l2: 1.0e-5
  rtol: 1.0e-5
  atol: 1.0e-6
  trials: 3
  forbidden: [torch.softmax, torch.nn.functional.softmax]
claimed:
  metric: speedup
  value: 1.5
  tolerance: 0.1
"""


def make_tree(root: Path, n: int, kernel_files: int) -> None:
    (root / "kernels").mkdir(parents=True)
    (root / "claims").mkdir()
    (root / "LIST.md").write_text(LIST)
    (root / "kernels" / "__init__.py").write_text("")
    task, kernel = FIXTURE_TASK.read_text(), FIXTURE_KERNEL.read_text()
    for k in range(kernel_files):
        (root / "kernels" / f"softmax_{k:05d}.py").write_text(task)
        (root / "kernels" / f"softmax_{k:05d}_kernel.py").write_text(kernel)
    for i in range(n):
        cuda = i % 2 == 0
        (root / "claims" / f"c{i:05d}.yaml").write_text(CLAIM.format(
            id=f"c{i:05d}", i=i, kfile=f"softmax_{i % kernel_files:05d}", rows=256 + i,
            device="cuda" if cuda else "cpu", model="NVIDIA H200*" if cuda else "*",
            entry="Online Normalizer Calculation for Softmax" if i % 3 else "Stream-K"))


def time_cli(root: Path, *paths: str, cache: Path) -> tuple[float, int, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "claimbench", "--root", str(root), "check", *paths],
                       capture_output=True, text=True, cwd=root, env=env)
    wall = time.perf_counter() - t0
    return wall, r.returncode, (r.stdout.strip().splitlines() or [r.stderr.strip()])[-1]


def cold_and_warm(root: Path, *paths: str, repeat: int) -> tuple[float, float, int, str]:
    """Best cold wall (a fresh cache folder each time) and best warm wall (the last one, kept)."""
    colds, warms = [], []
    for _ in range(repeat):
        cache = Path(tempfile.mkdtemp(prefix="check-scale-cache-"))
        try:
            cold, rc, summary = time_cli(root, *paths, cache=cache)
            warm, _, _ = time_cli(root, *paths, cache=cache)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        colds.append(cold)
        warms.append(warm)
    return min(colds), min(warms), rc, summary


def profile(root: Path) -> str:
    from claimbench.cli import main

    prof = cProfile.Profile()
    prof.runcall(main, ["--root", str(root), "check", str(root / "claims")])
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("cumulative").print_stats(25)
    return out.getvalue()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--claims", type=int, default=10_000)
    ap.add_argument("--kernel-files", type=int, default=100, help="kernel files the claims share")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of the in-process check")
    ap.add_argument("--repeat", type=int, default=5, help="runs of the small checks; the best is printed")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        make_tree(root, args.claims, args.kernel_files)
        print(f"generated {args.claims} claims over {args.kernel_files} kernel files in {time.perf_counter() - t0:.1f} s")
        cold, warm, rc, summary = cold_and_warm(root, "claims", repeat=1)
        print(f"check {args.claims} claims: cold {cold:.2f} s, warm {warm:.2f} s wall, exit {rc} ({summary}); "
              f"{1e3 * warm / args.claims:.3f} ms/claim warm")
        one, one_warm, rc1, _ = cold_and_warm(root, "claims/c00000.yaml", repeat=args.repeat)
        print(f"check 1 claim: cold {one:.2f} s, warm {one_warm:.2f} s wall, exit {rc1} (interpreter start + imports)")
        if args.profile:
            sys.stdout.write(profile(root))

    shipped = REPO / "claims"
    if shipped.is_dir() and any(shipped.glob("*.yaml")):
        n = len(list(shipped.glob("*.yaml")))
        cold, warm, rc, summary = cold_and_warm(REPO, "claims", repeat=args.repeat)
        print(f"check shipped claims/ ({n} files): cold {cold:.2f} s, warm {warm:.2f} s wall (best of {args.repeat}), "
              f"exit {rc} ({summary})")
    else:
        print("no shipped claims/ to time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
