"""Stage `racecheck`: compute-sanitizer's racecheck and synccheck on the scan and Stream-K kernels.

Small sizes that still cross blocks: 41 scan partitions (the look-back walks past one 32-wide
window) and a Stream-K GEMM whose tiles are shared between programs. racecheck sees hazards on
shared memory only; the cross-block protocols (scan descriptors, Stream-K flags) live in global
memory, which it does not check: the drivers' own result checks (exact scan, rel L2 of the GEMM)
are the evidence for those, under the sanitizer's changed timing.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .stage_io import Ctx, run_cmd, say, tail, write_result

TOOLS = ("racecheck", "synccheck")
KERNELS = ("scan", "streamk")
_RACE = re.compile(r"RACECHECK SUMMARY:\s*(\d+) hazards? displayed \((\d+) errors?, (\d+) warnings?\)")
_ERRORS = re.compile(r"ERROR SUMMARY:\s*(\d+) errors?")


def parse_sanitizer(text: str) -> dict:
    """Hazards, errors and the drivers' per-kernel lines from one compute-sanitizer run."""
    out: dict = {"drivers": {}}
    m = _RACE.search(text)
    if m:
        out.update(hazards=int(m.group(1)), race_errors=int(m.group(2)), race_warnings=int(m.group(3)))
    m = _ERRORS.search(text)
    if m:
        out["errors"] = int(m.group(1))
    for line in text.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and parts[0] == "DRIVER":
            out["drivers"][parts[1]] = {"ok": parts[2] == "ok", "detail": parts[3] if len(parts) > 3 else ""}
    return out


def verdict(parsed: dict, kernels: tuple[str, ...], timed_out: bool) -> tuple[bool, str]:
    drivers = parsed.get("drivers", {})
    missing = [k for k in kernels if k not in drivers]
    failed = [k for k in kernels if k in drivers and not drivers[k]["ok"]]
    errs = parsed.get("errors")
    parts = []
    if errs is None:
        parts.append("no ERROR SUMMARY" + (" (timed out)" if timed_out else ""))
    else:
        parts.append(f"{errs} errors")
    if "hazards" in parsed:
        parts.append(f"{parsed['hazards']} hazards ({parsed['race_errors']} errors, {parsed['race_warnings']} warnings)")
    if failed:
        parts.append(f"wrong result: {', '.join(failed)}")
    if missing:
        parts.append(f"did not finish: {', '.join(missing)}")
    ok = errs == 0 and not failed and not missing and parsed.get("race_errors", 0) == 0
    return ok, "; ".join(parts)


def racecheck_stage(ctx: Ctx) -> None:
    art, root = ctx.art_path, Path(ctx.root)
    tool = shutil.which("compute-sanitizer")
    driver = [ctx.python, str(root / "scripts" / "gpucheck" / "drivers.py"), "sanitize", ",".join(KERNELS),
              "--device", ctx.device]
    if tool is None or ctx.device != "cuda":
        why = "compute-sanitizer not on PATH" if tool is None else "dry run"
        p = run_cmd(driver, timeout_s=max(5.0, ctx.left_s() - 2.0), cwd=root, log=art / "sanitizer-rehearsal.log")
        say(f"racecheck: {why}; ran the driver without it: rc={p.rc}\n{tail(p.out, len(KERNELS))}")
        parsed = parse_sanitizer(p.out)
        done = all(parsed["drivers"].get(k, {}).get("ok") for k in KERNELS)
        status = "fail" if not done else ("partial" if ctx.device != "cuda" else "skipped")  # a broken driver is broken
        write_result(ctx, "racecheck", status,
                     f"{why}; driver alone: {'both kernels correct' if done else 'driver FAILED'}",
                     {"drivers": parsed["drivers"]})
        return
    results, oks = {}, []
    for i, name in enumerate(TOOLS):
        limit = (ctx.left_s() - 2.0) / (len(TOOLS) - i)
        if limit < 10.0:
            say(f"{name}: skipped: budget ({limit:.0f} s left for it)")
            results[name] = {"skipped": f"budget {limit:.0f} s"}
            continue
        cmd = [tool, "--tool", name, "--print-limit", "50", *driver]
        say(f"{name}: {' '.join(cmd)}  (limit {limit:.0f} s)")
        p = run_cmd(cmd, timeout_s=limit, cwd=root, log=art / f"sanitizer-{name}.log")
        parsed = parse_sanitizer(p.text)
        ok, why = verdict(parsed, KERNELS, p.timed_out)
        say(f"{name}: {'clean' if ok else 'NOT CLEAN'}: {why} (rc={p.rc}, {p.seconds:.0f} s)")
        if not ok:
            say(tail(p.text, 15))
        results[name] = {**parsed, "ok": ok, "why": why, "rc": p.rc, "seconds": p.seconds, "timed_out": p.timed_out}
        oks.append(ok)
    ran = [n for n in TOOLS if "ok" in results[n]]
    summary = "; ".join(f"{n}: {'clean' if results[n]['ok'] else results[n]['why']}" if "ok" in results[n]
                        else f"{n}: {results[n]['skipped']}" for n in TOOLS)
    status = "fail" if not all(oks) else ("ok" if len(ran) == len(TOOLS) else "partial")
    write_result(ctx, "racecheck", status, summary, results)
