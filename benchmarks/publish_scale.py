"""How publish, audit and table scale: 100,000 records over 2,000 claims and 10 kinds of hardware.

Builds a temporary project (2,000 claims that pass `check`, 20 stub kernel files, a list with one
entry per claim) and 100,000 record files shaped like the runner's (every field filled, 60 raw
samples per side in 12 rounds, 5 correctness trials, indent=1 JSON as `write_record` writes it).
Each record's verdict comes from `decide()`: samples are drawn from 40 templates per claim kind,
so generation takes minutes instead of hours, while every record file is still distinct and
self-consistent (audit finds 0 problems). The project is a git repository and every record names
its real commit, whose files have the hashes the record carries: the path timed is the one real
records take, with the commit check (`store/atcommit`) included, not the refusal path. Then it times, each in a fresh process through the CLI:
the cold index rebuild, publish, a second (idempotent) publish, audit cold and warm, and table,
at 10k, 30k and 100k records (the smaller trees are hard-linked subsets of the big one).

    .venv/bin/python benchmarks/publish_scale.py [--records 100000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from claimbench.store.record import PROTOCOL_VERSION, SCHEMA_VERSION

HW = ["nvidia-h200", "nvidia-h100-80gb-hbm3", "nvidia-a100-sxm4-80gb", "nvidia-b200", "nvidia-gh200-480gb",
      "nvidia-l40s", "nvidia-rtx-6000-ada-generation", "nvidia-h20", "nvidia-a10g", "nvidia-b300"]
KINDS = [("speedup", 1.5, None), ("speedup", 1.2, None), ("gbps", 3000.0, None), ("tflops", 600.0, "2 * n * n * n"),
         ("time_us", 900.0, None)]
FLOPS = 2.0 * 8192 ** 3  # the tflops claims' `2 * n * n * n` at n = 8192: records copy what the claim computes
N_CLAIMS, SIDE, ROUNDS, TEMPLATES = 2000, 60, 12, 40
CLI = [sys.executable, "-m", "claimbench"]
TARGETS_S = {"publish (cold check)": 10.0, "audit cold": 10.0, "audit warm (cache)": 5.0}  # wall, at 100,000 records


def sha(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def make_project(root: Path) -> None:
    (root / "kernels").mkdir(parents=True)
    (root / "claims").mkdir()
    (root / "kernels" / "__init__.py").write_text("")
    for k in range(20):  # task and kernel apart, as check requires
        (root / "kernels" / f"t{k:02d}.py").write_text(
            f'"""Benchmark stub task {k}: nothing runs."""\n\nimport torch\n\n\n'
            "def make_inputs(*, seed, device, dtype, **params):\n"
            "    g = torch.Generator().manual_seed(seed)\n"
            "    return (torch.randn(params['n'], params['n'], generator=g).to(device),)\n\n\n"
            "def baseline(x):\n    return x.clone()\n\n\n"
            "def reference_fp64(x):\n    return x.to(torch.float64)\n")
        (root / "kernels" / f"k{k:02d}.py").write_text(
            f'"""Benchmark stub kernel {k}: nothing runs."""\n\n\n' "def kernel(x):\n    return x.clone()\n")
    lines = ["# Scale-test list", ""]
    for sec in range(20):
        lines += [f"## Section {sec}", ""]
        lines += [f"- Entry {sec * 100 + i:04d} - Hand-written description of entry {sec * 100 + i}."
                  for i in range(100)] + [""]
    (root / "LIST.md").write_text("\n".join(lines))
    for c in range(N_CLAIMS):
        metric, value, flops = KINDS[c % len(KINDS)]
        k, t = f"kernels/k{c % 20:02d}.py", f"kernels/t{c % 20:02d}.py"
        (root / "claims" / f"claim-{c:04d}.yaml").write_text(
            f"id: claim-{c:04d}\ntitle: Scale claim {c}\nentry: Entry {c:04d}\n"
            f"source:\n  kind: paper\n  title: Source {c}\n  url: https://example.org/{c}\n  locator: Table 2\n"
            f"hardware:\n  device: cuda\n  model: [\"NVIDIA *\"]\n"
            f"workload:\n  inputs: {t}:make_inputs\n  params: {{n: 8192}}\n"
            + (f"  flops: \"{flops}\"\n" if flops else "") + "  bytes: \"4 * n * n\"\n"
            "  memory: {operands_bytes: \"n * n * itemsize\", output_elements: \"n * n\", reference_bytes: \"0\"}\n"
            f"precision:\n  dtype: bfloat16\nkernel:\n  name: kernel {c}\n  impl: {k}:kernel\n"
            f"baseline:\n  name: baseline {c}\n  impl: {t}:baseline\n"
            f"correctness:\n  method: allclose\n  reference: {t}:reference_fp64\n"
            f"  max_rel_l2: 1.0e-2\n  rtol: 1.0e-2\n  atol: 1.0e-3\n  trials: 5\n"
            f"claimed:\n  metric: {metric}\n  value: {value}\n  tolerance: 0.05\n")


def templates() -> dict[int, list[dict]]:
    """Per claim kind, TEMPLATES sample sets with their decide() outcome."""
    from claimbench.stats.verdict import Evidence, Samples, decide

    rng = np.random.default_rng(0)
    out = {}
    for kind, (metric, claimed, flops) in enumerate(KINDS):
        rows = []
        for t in range(TEMPLATES):
            k_us = 300.0 * (1 + 0.002 * t)
            ratio = claimed * (0.85 + 0.3 * t / TEMPLATES) if metric == "speedup" else 1.6
            kern = (k_us * (1 + 0.01 * rng.standard_normal(SIDE))).tolist()
            if metric == "time_us":
                kern = (claimed * (0.9 + 0.2 * t / TEMPLATES) * (1 + 0.01 * rng.standard_normal(SIDE))).tolist()
            if metric == "gbps":
                kern = (268435456 / (claimed * (0.85 + 0.3 * t / TEMPLATES)) / 1e3 * (1 + 0.01 * rng.standard_normal(SIDE))).tolist()
            if metric == "tflops":
                kern = (FLOPS / (claimed * (0.85 + 0.3 * t / TEMPLATES)) / 1e6 * (1 + 0.01 * rng.standard_normal(SIDE))).tolist()
            base = (np.median(kern) * ratio * (1 + 0.01 * rng.standard_normal(SIDE))).tolist()
            rounds = [i * ROUNDS // SIDE for i in range(SIDE)]
            ev = Evidence(metric=metric, claimed_value=claimed, tolerance=0.05, correctness_passed=True,
                          flops=FLOPS if flops else None, bytes=268435456.0, tensor_bytes=536870912.0,
                          kernel=Samples(kern, rounds, [0] * SIDE), baseline=Samples(base, rounds, [0] * SIDE),
                          floor_us=50.0, floor_term="bytes / bandwidth")
            v = decide(ev)
            rows.append({"kernel": kern, "baseline": base, "rounds": rounds, "verdict": v.status.value,
                         "reason": v.reason, "value": v.value, "ci_low": v.ci_low, "ci_high": v.ci_high,
                         "published_value": v.published_value, "flops": FLOPS if flops else None})
        out[kind] = rows
    return out


def _side(samples, rounds):
    x = np.asarray(samples)
    q1, q3 = np.percentile(x, [25, 75])
    return {"samples_us": samples, "rounds": rounds, "processes": [0] * len(samples), "dropped_us": [],
            "median_us": float(np.median(x)), "iqr_us": float(q3 - q1)}


def commit_project(root: Path) -> str:
    """The claims, kernels and list committed (results stay untracked, as a run leaves them); HEAD."""
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(root), "-c", "user.name=bench", "-c", "user.email=bench@example.com",
                               "-c", "commit.gpgsign=false", *a], check=True, capture_output=True, text=True).stdout.strip()
    git("init", "-q")
    git("add", "claims", "kernels", "LIST.md")
    git("commit", "-q", "-m", "the scale project")
    return git("rev-parse", "HEAD")


def write_records(args) -> int:
    root, jobs, tpl, hashes, commit = args
    for n, c, h, day in jobs:
        metric, claimed, _ = KINDS[c % len(KINDS)]
        t = tpl[c % len(KINDS)][(n * 7919) % TEMPLATES]
        slug = HW[h]
        name = "NVIDIA " + slug.removeprefix("nvidia-").upper().replace("-", " ")
        created = f"2026-{1 + day // 28:02d}-{1 + day % 28:02d}T{n % 24:02d}:{n % 60:02d}:{(n // 60) % 60:02d}.{n % 1000000:06d}Z"
        dirty = n % 50 == 0
        rec = {
            "schema_version": SCHEMA_VERSION, "protocol_version": PROTOCOL_VERSION, "claim_id": f"claim-{c:04d}", "created_utc": created,
            "harness_version": "0.1.0", "git_commit": commit, "git_dirty": dirty,
            "claim_sha256": hashes["claim", c], "claim_path": f"claims/claim-{c:04d}.yaml",
            "source_sha256": {f"kernels/k{c % 20:02d}.py": hashes["k", c % 20], f"kernels/t{c % 20:02d}.py": hashes["t", c % 20],
                              "kernels/__init__.py": hashes["init"]},
            "seeds": [n * 10 + i for i in range(5)],
            "hardware": {"device": "cuda", "slug": slug, "name": name,
                         "gpus": [{"index": 0, "name": name, "uuid": f"GPU-{n:08x}", "compute_capability": "9.0",
                                   "sm_count": 132, "l2_bytes": 62914560, "memory_bytes": 150323855360,
                                   "driver_version": "580.65", "cuda_version": "13.0", "sm_clock_mhz": 1980,
                                   "mem_clock_mhz": 3201, "max_sm_clock_mhz": 1980, "throttle_reasons": 0,
                                   "temperature_c": 41, "power_w": 312.5, "power_limit_w": 700.0,
                                   "mig_enabled": False, "ecc_enabled": True, "other_processes": []}],
                         "cpu": {"model": "AMD EPYC 9654 96-Core Processor", "cores": 16, "threads_used": 1,
                                 "memory_bytes": 137438953472, "llc_bytes": 33554432},
                         "software": {"python": "3.11.9", "torch": "2.13.0", "triton": "3.9.0", "cupy": None,
                                      "numpy": "2.3.0", "claimbench": "0.1.0"}},
            "hardware_match": True, "hardware_reason": "", "blockers": [], "mode": "measured",
            "claimed": {"metric": metric, "value": claimed, "tolerance": 0.05, "max_ci_halfwidth": None,
                        "precision_reason": None},  # every key the claim's model dumps, as the runner copies it
            "precision": {"dtype": "bfloat16", "accumulate": None, "check_dtype": None},
            "hardware_spec": {"device": "cuda", "model": ["NVIDIA *"], "compute_capability": None, "sm_count": None,
                              "count": 1, "nodes": 1},
            "workload": {"inputs": f"kernels/t{c % 20:02d}.py:make_inputs", "params": {"n": 8192}, "check_params": [],
                         "flops": KINDS[c % len(KINDS)][2], "bytes": "4 * n * n",
                         "memory": {"operands_bytes": "n * n * itemsize", "output_elements": "n * n",
                                    "reference_bytes": "0", "sides_bytes": None}},
            "flops": t["flops"], "bytes": 268435456.0, "tensor_bytes": 536870912.0,
            "protocol": {"warmup_s": 1.02, "flush_bytes": 125829120, "stop_reason": "rse of the median < 0.5%",
                         "rounds": ROUNDS, "calls_per_round": 5, "dropped": 0, "autotune": {"BLOCK": 1024, "num_warps": 8}},
            "correctness": {"passed": True, "reason": "", "trials": [
                {"seed": n * 10 + i, "passed": True, "reason": "", "outputs": [
                    {"shape": [8192, 8192], "dtype": "bfloat16", "rel_l2": 0.0021 + i * 1e-4, "max_abs_err": 0.0039,
                     "worst_elem_ratio": 0.41, "passed": True, "reason": ""}]} for i in range(5)],
                "null_models": {"zeros": False, "row_mean": False, "one_precision_lower": False}},
            "rejections": [], "outcome": None, "outcome_reason": "",
            "kernel": _side(t["kernel"], t["rounds"]), "baseline": _side(t["baseline"], t["rounds"]),
            "throttled_majority": False,
            "ceilings": {"bandwidth_gbps": 4410.0, "matrix_tflops": {"bfloat16": 792.0}},
            "floor_us": 50.0, "floor_term": "bytes / bandwidth",
            "verdict": t["verdict"], "reason": t["reason"], "value": t["value"], "ci_low": t["ci_low"],
            "ci_high": t["ci_high"], "published_value": t["published_value"],
        }
        data = json.dumps(rec, indent=1, sort_keys=True, allow_nan=False) + "\n"
        digest = hashlib.sha256(data.encode()).hexdigest()[:10]
        stamp = created.split(".")[0].replace("-", "").replace(":", "") + "Z"
        d = root / "results" / "records" / f"claim-{c:04d}"
        (d / f"{stamp}-{slug}-{digest}.json").write_text(data)
    return len(jobs)


def generate(root: Path, n_records: int) -> list[Path]:
    make_project(root)
    commit = commit_project(root)
    hashes = {("claim", c): sha(root / "claims" / f"claim-{c:04d}.yaml") for c in range(N_CLAIMS)}
    hashes.update({("k", k): sha(root / "kernels" / f"k{k:02d}.py") for k in range(20)})
    hashes.update({("t", k): sha(root / "kernels" / f"t{k:02d}.py") for k in range(20)})
    hashes["init"] = sha(root / "kernels" / "__init__.py")
    for c in range(N_CLAIMS):
        (root / "results" / "records" / f"claim-{c:04d}").mkdir(parents=True)
    jobs = [(n, n % N_CLAIMS, (n // N_CLAIMS) % len(HW), (n * 37) % 300) for n in range(n_records)]
    tpl = templates()
    chunks = [jobs[i::8] for i in range(8)]
    with ProcessPoolExecutor(2) as pool:
        sum(pool.map(write_records, [(root, ch, tpl, hashes, commit) for ch in chunks]))
    files = sorted((root / "results" / "records").rglob("*.json"))
    random.Random(1).shuffle(files)
    return files


def subset(big: Path, files: list[Path], n: int, dst: Path) -> None:
    for name in ("claims", "kernels"):
        shutil.copytree(big / name, dst / name, copy_function=os.link)
    shutil.copy(big / "LIST.md", dst / "LIST.md")
    shutil.copytree(big / ".git", dst / ".git")  # the same commit: the records name it
    for f in files[:n]:
        target = dst / f.relative_to(big)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.link(f, target)


def timed(cmd: list[str], root: Path) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (the command and its worker processes), last line of output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    dt = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tail = (p.stdout.strip().splitlines() or [""])[-1][:110]
    if p.returncode not in (0, 1):
        raise SystemExit(f"{cmd} failed ({p.returncode}):\n{p.stderr[-2000:]}")
    return dt, cpu, tail


def fingerprints() -> str:
    out = subprocess.run([sys.executable, "-c", "from claimbench.gate import gatecache; from claimbench.report import audit; "
                          "print(audit.fingerprint(), gatecache._fingerprint())"], capture_output=True, text=True)
    return out.stdout.strip()


def measure(root: Path) -> dict[str, tuple[float, float, str]]:
    r = ["--root", str(root)]
    py = [sys.executable, "-c", "import sys; from claimbench.store.index import read_index; "
          "i = read_index(sys.argv[1]); print(len(i.summaries), 'records,', i.reread, 'read from disk')",
          str(root / "results")]
    (root / "results" / "index.jsonl").unlink(missing_ok=True)
    shutil.rmtree(root / "results" / ".cache", ignore_errors=True)
    out = {"index rebuild (cold)": timed(py, root), "index read (warm)": timed(py, root)}
    out["publish (cold check)"] = timed(CLI + r + ["publish"], root)
    published = (root / "LIST.md").read_text()
    out["publish again (no change)"] = timed(CLI + r + ["publish"], root)
    (root / "LIST.md").write_text(published.replace("<!-- claimbench:", "<!-- claimbench:x", 50))
    out["publish (50 edited)"] = timed(CLI + r + ["publish"], root)
    shutil.rmtree(root / "results" / ".cache", ignore_errors=True)
    before = fingerprints()
    out["audit cold"] = timed(CLI + r + ["audit"], root)
    out["audit warm (cache)"] = timed(CLI + r + ["audit"], root)
    if fingerprints() != before:  # someone edited verdict.py & co. meanwhile: the cache was rightly dropped
        out["audit warm (cache)"] = (*out["audit warm (cache)"][:2], "INVALID: checking code changed during the run")
    out["table (md)"] = timed(CLI + r + ["table", "--verdict", "verified"], root)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--sizes", default="10000,30000")
    ap.add_argument("--keep", default=None, help="build the trees here and keep them (reused when present)")
    args = ap.parse_args()
    base = Path(args.keep or tempfile.mkdtemp(prefix="claimbench-scale-"))
    t = time.perf_counter()
    big = base / f"n{args.records}"
    if big.is_dir():  # --keep DIR from an earlier run: reuse its trees
        files = sorted((big / "results" / "records").rglob("*.json"))
        random.Random(1).shuffle(files)
    else:
        files = generate(big, args.records)
    mb = sum(f.stat().st_size for f in files) / 1e6
    print(f"generated {len(files)} records ({mb:.0f} MB) over {N_CLAIMS} claims and {len(HW)} hardware kinds "
          f"in {time.perf_counter() - t:.0f} s under {base}", flush=True)
    sizes = sorted({int(s) for s in args.sizes.split(",") if s} | {args.records})
    results = {}
    for n in sizes:
        root = big if n == args.records else base / f"n{n}"
        if root != big and not root.is_dir():
            subset(big, files, n, root)
        results[n] = measure(root)
        print(f"\n{n} records:", flush=True)
        for name, (dt, cpu, tail) in results[n].items():
            print(f"  {name:<28} {dt:7.2f} s wall {cpu:7.2f} s cpu   {tail}", flush=True)
    print(f"\nwall seconds (cpu seconds) by records; load average now {os.getloadavg()[0]:.1f}")
    print(" " * 30 + "".join(f"{n:>18}" for n in sizes) + "   target at 100,000 (issue 25)")
    for name in results[sizes[-1]]:
        goal = TARGETS_S.get(name)
        verdict = "" if goal is None or 100_000 not in results else \
            f"   <= {goal:g} s: {'met' if results[100_000][name][0] <= goal else 'NOT met'}"
        print(f"  {name:<28}" + "".join(f"{results[n][name][0]:9.2f} ({results[n][name][1]:6.2f})" for n in sizes)
              + verdict)
    if not args.keep:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
