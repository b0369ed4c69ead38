#!/usr/bin/env python3
"""The GPU path proved on one lent H200, in one run of at most 5 minutes (issue 7).

Stages, each in its own process with its own share of --budget-s (skipped, with the reason
printed, when too little is left; a failing stage is reported and the next one runs, except
`smoke`, whose failure ends the run so the rest of the window goes to fixing and rerunning):
  smoke      the profiler's stream check, the cold timer and one small claim end to end (< 60 s)
  env        nvidia-smi, claimbench's detection, versions, blockers for `verified`
  ceilings   measured copy bandwidth and matmul rates, against the figures seen on an H200 before
  fidelity   claimbench's cold median vs triton.testing.do_bench and ncu on 4 kernels, 5 us to 5 ms
  repeat     one claim 3 times: the spread of its measured value
  cheats     GPU cheat fixtures through the real runner; an honest control; the L2-reset probe
  racecheck  compute-sanitizer racecheck and synccheck on the scan and Stream-K kernels
  claims     `claimbench run` on every CUDA claim that fits, each with a share of the time left

Output, in --out: gpu_check.log (every line, flushed as printed), summary.json (rewritten after
every stage), results.tar.gz (this run's new results/records plus results/gpu-check/<stamp>/:
logs, stage reports, tool outputs; extract it at the repository root). --dry-run rehearses every
stage's control flow on the CPU. This process itself never imports torch, so no CUDA context of
its own is alive while claims are measured.
"""

from __future__ import annotations

import argparse
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tarfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from gpucheck.stage_io import Ctx, kill_tree, load_json, setup_paths, write_result  # noqa: E402  (no torch)

STAGES = ("smoke", "env", "ceilings", "fidelity", "repeat", "cheats", "racecheck", "claims")
ENTRY = {"smoke": "smoke:smoke_stage", "env": "env_ceilings:env_stage", "ceilings": "env_ceilings:ceilings_stage",
         "fidelity": "fidelity:fidelity_stage", "repeat": "repeat_claims:repeat_stage",
         "cheats": "cheats:cheats_stage", "racecheck": "racecheck:racecheck_stage",
         "claims": "repeat_claims:claims_stage"}
# Seconds each stage wants on an H200 when the whole run has 280: the budget table of
# docs/gpu_check.md, each from its parts (a `claimbench run` costs ~8 s before its child starts
# there, a fresh process ~5 s to import torch and make a CUDA context, a Triton kernel's first
# call compiles it): shares of what is left.
WEIGHTS = {"smoke": 45, "env": 8, "ceilings": 20, "fidelity": 45, "repeat": 48, "cheats": 58, "racecheck": 24,
           "claims": 32}
MIN_S = {"smoke": 30, "env": 6, "ceilings": 12, "fidelity": 25, "repeat": 30, "cheats": 25, "racecheck": 20,
         "claims": 30}
CAP_S = {"smoke": 60, "env": 20, "ceilings": 45, "fidelity": 100, "repeat": 120, "cheats": 100, "racecheck": 90,
         "claims": 1e9}
# The CPU rehearsal: a claim's process costs 5-15 s on a small CPU machine, so the stages that run
# claims get most of it; the GPU measurements it skips cost nothing there.
DRY_WEIGHTS = {"smoke": 30, "env": 3, "ceilings": 4, "fidelity": 12, "repeat": 30, "cheats": 28, "racecheck": 5,
               "claims": 18}
DRY_MIN_S = {"smoke": 25, "env": 3, "ceilings": 4, "fidelity": 8, "repeat": 10, "cheats": 10, "racecheck": 4,
             "claims": 10}
RESERVE_S = 6.0   # packing and the summary at the end
GRACE_S = 5.0     # past its deadline a stage's process group is killed


def plan_budget(stage: str, remaining: list[str], left_s: float, dry_run: bool = False) -> tuple[float | None, str]:
    """This stage's seconds: its weight's share of what is left (between its minimum and cap), or
    (None, why) when even its minimum no longer fits."""
    weights, least = (DRY_WEIGHTS, DRY_MIN_S) if dry_run else (WEIGHTS, MIN_S)
    usable = left_s - RESERVE_S
    if usable < least[stage]:
        return None, f"{max(usable, 0):.0f} s left, it needs {least[stage]} s"
    share = usable * weights[stage] / sum(weights[s] for s in remaining)
    return min(CAP_S[stage], max(share, least[stage]), usable), ""


class Log:
    def __init__(self, path: Path) -> None:
        self.f = open(path, "a", encoding="utf-8", buffering=1)

    def __call__(self, line: str = "") -> None:
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def run_stage(name: str, ctx: Ctx, budget_s: float, work: Path, log: Log) -> dict:
    ctx_file = work / f"ctx-{name}.json"
    ctx.dump(ctx_file)
    (Path(ctx.art) / f"stage-{name}.json").unlink(missing_ok=True)
    cmd = [ctx.python, str(Path(__file__).resolve()), "--stage", name, "--ctx", str(ctx_file)]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    deadline, buf, timed_out = t0 + budget_s + GRACE_S, b"", False
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 1.0))
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                log(f"  {line.decode('utf-8', 'replace')}")
    finally:
        _kill(proc)
    if buf:
        log(f"  {buf.decode('utf-8', 'replace')}")
    secs = time.monotonic() - t0
    res = load_json(Path(ctx.art) / f"stage-{name}.json") or {}
    if timed_out:
        res = {**res, "status": "fail" if not res else res.get("status"),
               "summary": f"TIMED OUT after {secs:.0f} s (budget {budget_s:.0f} s); " + res.get("summary", "")}
    elif not res:
        res = {"status": "fail", "summary": f"stage process exited {proc.returncode} without a report"}
    return {"stage": name, "status": res.get("status"), "seconds": round(secs, 1), "budget_s": round(budget_s, 1),
            "summary": res.get("summary", "")}


def _kill(proc: subprocess.Popen) -> None:
    kill_tree(proc.pid)  # the stage's group, and what its children started in their own sessions
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def reap_groups(registry: Path, log: Log) -> None:
    """Kill every process group a stage started through run_cmd (tools, `claimbench run`): none
    may outlive its stage and hold the GPU while the next one measures."""
    if not registry.is_file():
        return
    for line in registry.read_text().split():
        try:
            pid = int(line)
            os.killpg(pid, 0)  # raises if the group is gone
        except (ProcessLookupError, PermissionError, ValueError):
            continue
        kill_tree(pid)
        log(f"  (killed leftover process group {pid})")
    registry.write_text("")


def gpu_processes() -> str:
    """Compute processes NVML still lists on the GPU, as nvidia-smi prints them ("" if none)."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return ""
    try:
        r = subprocess.run([smi, "--query-compute-apps=pid,process_name,used_memory", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.SubprocessError):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


def pack(out: Path, results: Path, art: Path, before: set[str], t_start: float, log: Log) -> Path:
    """One tarball: new records at results/records/..., and this run's folder, at their repo paths."""
    cache = results / ".cache"
    for src, sub in [(p, "cache") for p in cache.glob("ceilings-*.json")] + \
                    [(p, "claim-logs") for p in (cache / "logs").glob("*.log")]:
        if src.stat().st_mtime >= t_start:
            (art / sub).mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, art / sub / src.name)
    for name in ("gpu_check.log", "summary.json"):
        if (out / name).is_file():
            shutil.copy2(out / name, art / name)
    tar = out / "results.tar.gz"
    n = 0
    with tarfile.open(tar, "w:gz") as t:
        for f in sorted((results / "records").rglob("*.json")):
            if str(f) not in before and not f.name.startswith(".tmp"):
                t.add(f, arcname=f"results/{f.relative_to(results)}")
                n += 1
        t.add(art, arcname=f"results/{art.relative_to(results)}")
    log(f"packed {n} new record(s) and {sum(1 for p in art.rglob('*') if p.is_file())} run file(s) into {tar}")
    return tar


def write_summary(out: Path, meta: dict, rows: list[dict]) -> None:
    tmp = out / ".summary.json.tmp"
    tmp.write_text(json.dumps({**meta, "stages": rows}, indent=1))
    os.replace(tmp, out / "summary.json")


def print_table(log: Log, meta: dict, rows: list[dict], tar: Path | None) -> None:
    log("")
    log(f"==== gpu_check: {meta['device']}{' (dry run)' if meta['dry_run'] else ''}, budget {meta['budget_s']:.0f} s, "
        f"used {meta['elapsed_s']:.0f} s, commit {str(meta['commit'])[:12]} dirty {meta['dirty']} ====")
    log(f"{'stage':10s} {'status':8s} {'time':>6s} {'budget':>6s}  result")
    for r in rows:
        log(f"{r['stage']:10s} {str(r['status']):8s} {r['seconds']:5.0f}s {r['budget_s']:5.0f}s  {r['summary'][:220]}")
    if tar is not None and tar.is_file():
        log(f"tarball: {tar} ({tar.stat().st_size / 1e6:.2f} MB); extract at the repo root: tar xzf results.tar.gz")


def preflight(log: Log) -> str:
    """Import every stage module (scripts/gpucheck/*.py) in one child process before any stage
    runs: a module that fails to import is known in the window's first seconds, not when its stage
    is reached minutes in. Returns "" when all import, else the failure's last lines."""
    names = sorted(p.stem for p in (ROOT / "scripts" / "gpucheck").glob("*.py") if p.stem != "__init__")
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n    importlib.import_module('gpucheck.' + m)\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "scripts"), os.environ.get("PYTHONPATH", "")])}
    t0 = time.monotonic()
    try:
        p = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=120,
                           env=env, cwd=ROOT)
        ok, text = p.returncode == 0, (p.stdout + p.stderr).strip()
    except subprocess.TimeoutExpired:
        ok, text = False, "importing the stage modules took over 120 s"
    if ok:
        log(f"imports: the {len(names)} stage modules import ({time.monotonic() - t0:.1f} s)")
        return ""
    log(f"imports: FAILED: a stage module does not import; no stage is run:\n{text[-3000:]}")
    return " ".join(text.splitlines()[-1:])[:300]


def orchestrate(a: argparse.Namespace) -> int:
    t_start = time.time()
    out = Path(a.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    results = Path(a.results).resolve() if a.results else (out / "dryrun-results" if a.dry_run else ROOT / "results")
    art = results / "gpu-check" / stamp
    art.mkdir(parents=True, exist_ok=True)
    work = Path(a.work or f"/tmp/gpu_check_work/{stamp}")
    work.mkdir(parents=True, exist_ok=True)
    log = Log(out / "gpu_check.log")
    if a.commit:
        os.environ["CLAIMBENCH_GIT_COMMIT"] = a.commit
    if a.dirty is not None:
        os.environ["CLAIMBENCH_GIT_DIRTY"] = a.dirty
    if a.dry_run:
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
    os.environ["PYTHONUNBUFFERED"] = "1"
    os.environ["GPU_CHECK_PGIDS"] = str(work / "pgids.txt")
    src = str(ROOT / "src")
    if src not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), src) if p)
    stages = [s.strip() for s in a.stages.split(",") if s.strip()]
    unknown = [s for s in stages if s not in STAGES]
    if unknown:
        log(f"unknown stage(s): {', '.join(unknown)}; known: {', '.join(STAGES)}")
        return 2
    device = "cpu" if a.dry_run else "cuda"
    before = {str(p) for p in (results / "records").rglob("*.json")}
    meta = {"stamp": stamp, "started_utc": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "budget_s": a.budget_s, "elapsed_s": 0.0, "device": device, "dry_run": a.dry_run,
            "commit": os.environ.get("CLAIMBENCH_GIT_COMMIT"), "dirty": os.environ.get("CLAIMBENCH_GIT_DIRTY"),
            "out": str(out), "results": str(results), "artifacts": str(art), "stages_asked": stages}
    log(f"gpu_check {stamp}: device {device}, budget {a.budget_s:.0f} s, stages {','.join(stages)}, "
        f"results {results}, python {sys.executable}")
    rows: list[dict] = []
    tar = None
    try:
        broken = preflight(log)
        if broken:  # a module that cannot import would fail its stage minutes in: fail now, run nothing
            rows.append({"stage": "imports", "status": "fail", "seconds": 0.0, "budget_s": 0.0, "summary": broken})
            rows += [{"stage": s, "status": "skipped", "seconds": 0.0, "budget_s": 0.0,
                      "summary": "a stage module does not import: fix it and rerun"} for s in stages]
            stages = []
        for i, name in enumerate(stages):
            left = a.budget_s - (time.time() - t_start)
            budget, why = plan_budget(name, stages[i:], left, a.dry_run)
            if budget is None:
                log(f"== {name}: SKIPPED: budget: {why}")
                rows.append({"stage": name, "status": "skipped", "seconds": 0.0, "budget_s": 0.0, "summary": f"budget: {why}"})
                continue
            log(f"== {name} (budget {budget:.0f} s, {left:.0f} s left of {a.budget_s:.0f})")
            ctx = Ctx(root=str(ROOT), results=str(results), art=str(art), device=device, dry_run=a.dry_run,
                      deadline=time.time() + budget, python=sys.executable,
                      claims=tuple(c for c in (a.claims or "").split(",") if c), repeat_claim=a.repeat_claim,
                      extra={"work": str(work), "budget_total_s": a.budget_s})
            row = run_stage(name, ctx, budget, work, log)
            reap_groups(work / "pgids.txt", log)
            left_on_gpu = gpu_processes() if device == "cuda" else ""
            if left_on_gpu:
                log(f"  WARNING: still on the GPU after {name} (later claims would see them as blockers): {left_on_gpu}")
            rows.append(row)
            log(f"== {name}: {row['status']} in {row['seconds']:.0f} s: {row['summary'][:300]}")
            meta["elapsed_s"] = round(time.time() - t_start, 1)
            write_summary(out, meta, rows)
            if name == "smoke" and row["status"] == "fail":
                for rest in stages[i + 1:]:  # the window's minutes go to fixing and rerunning, not to stages that would fail too
                    rows.append({"stage": rest, "status": "skipped", "seconds": 0.0, "budget_s": 0.0,
                                 "summary": "smoke failed: fix it and rerun"})
                log(f"== smoke failed: the other stages are not run ({', '.join(stages[i + 1:]) or 'none'}); "
                    "fix it and rerun")
                break
    except (KeyboardInterrupt, SystemExit) as e:
        log(f"interrupted ({type(e).__name__}); packing what there is")
    finally:
        reap_groups(work / "pgids.txt", log)
        sw = ((load_json(art / "hardware.json") or {}).get("software") or {})
        if sw:  # what claimbench itself recorded (env var or git), as the records carry it
            meta["commit"], meta["dirty"] = sw.get("git_commit"), sw.get("git_dirty")
        meta["elapsed_s"] = round(time.time() - t_start, 1)
        write_summary(out, meta, rows)
        try:
            tar = pack(out, results, art, before, t_start, log)
            meta["tarball"] = str(tar)
        except Exception as e:  # the log and summary still come back
            log(f"packing failed: {type(e).__name__}: {e}")
        meta["elapsed_s"] = round(time.time() - t_start, 1)
        write_summary(out, meta, rows)
        print_table(log, meta, rows, tar)
    return 1 if any(r["status"] == "fail" for r in rows) else 0


def stage_main(name: str, ctx_file: str) -> int:
    ctx = Ctx.load(Path(ctx_file))
    setup_paths(Path(ctx.root))
    module, func = ENTRY[name].split(":")
    try:
        fn = getattr(__import__(f"gpucheck.{module}", fromlist=[func]), func)
        fn(ctx)
    except Exception as e:
        traceback.print_exc(file=sys.stdout)
        write_result(ctx, name, "fail", f"crashed: {type(e).__name__}: {str(e)[:300]}")
        return 1
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "results" / "gpu-check"), help="where the log, summary and tarball go")
    ap.add_argument("--budget-s", type=float, default=280.0, help="the whole run, in seconds (default 280)")
    ap.add_argument("--stages", default=",".join(STAGES), help=f"comma-separated, in order (default {','.join(STAGES)})")
    ap.add_argument("--commit", default=None, help="git commit of the tree (when .git did not travel)")
    ap.add_argument("--dirty", choices=("0", "1"), default=None, help="whether that tree had changes (0: clean)")
    ap.add_argument("--claims", default=None, help="claims stage: comma-separated claim ids or globs, in run order")
    ap.add_argument("--repeat-claim", default=None, help="repeat stage: claim path relative to the root")
    ap.add_argument("--results", default=None, help="claimbench results folder (default results/; dry run: OUT/dryrun-results)")
    ap.add_argument("--work", default=None, help="scratch folder (default /tmp/gpu_check_work/<stamp>)")
    ap.add_argument("--dry-run", action="store_true", help="rehearse every stage on the CPU")
    ap.add_argument("--device", choices=("cuda", "cpu"), default=None, help="cpu is the same as --dry-run")
    ap.add_argument("--stage", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ctx", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.stage:
        return stage_main(a.stage, a.ctx)
    a.dry_run = a.dry_run or a.device == "cpu"
    signal.signal(signal.SIGTERM, lambda sig, frame: (_ for _ in ()).throw(SystemExit(128 + sig)))
    return orchestrate(a)


if __name__ == "__main__":
    sys.exit(main())
