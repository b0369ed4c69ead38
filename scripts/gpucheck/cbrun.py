"""`claimbench run` on one claim as a subprocess, and what its record says against the ceilings.

One process per claim, so each claim gets its own time limit from the budget left, and the
caller never holds the GPU while a claim is measured.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .stage_io import Ctx, Proc, load_json, run_cmd, tail

# `claimbench run` itself before its child starts: interpreter, imports, detect (NVML, torch, CUDA)
PARENT_OVERHEAD_S = {"cuda": 8.0, "cpu": 3.0}


@dataclass(frozen=True)
class ClaimBudget:
    timeout_s: float      # --timeout-s: the claim's child process
    max_time_s: float     # --max-time-s: the timed rounds
    warmup_s: float       # --warmup-s
    hard_s: float         # kill the whole `claimbench run` after this


def claim_budget(per_s: float, device: str = "cuda") -> ClaimBudget:
    """Split one claim's seconds: most to the child (inputs, correctness, rounds), a quarter of it
    to timed rounds (0.5 to 10 s), a little to warm-up (0.2 to 1 s). A CPU rehearsal needs the
    path, not a number: its rounds and warm-up stay at the least whatever the budget, so a larger
    budget only gives a loaded machine room, never more work."""
    timeout = max(5.0, per_s - PARENT_OVERHEAD_S.get(device, 8.0))
    if device != "cuda":
        return ClaimBudget(timeout_s=round(timeout, 1), max_time_s=0.5, warmup_s=0.2, hard_s=per_s + 4.0)
    return ClaimBudget(timeout_s=round(timeout, 1), max_time_s=round(min(10.0, max(0.5, 0.25 * timeout)), 2),
                       warmup_s=round(min(1.0, max(0.2, 0.04 * timeout)), 2), hard_s=per_s + 4.0)


def run_claim(ctx: Ctx, claim: Path, results: Path, budget: ClaimBudget, *, root: Optional[Path] = None,
              log: Optional[Path] = None, extra: tuple[str, ...] = ()) -> dict:
    """One `claimbench run --format json` (``extra``: more of its flags); returns its outcome dict, or
    an error outcome explaining why not."""
    root = Path(root or ctx.root)
    cmd = [ctx.python, "-m", "claimbench", "--root", str(root), "run", str(claim), "--results", str(results),
           "--format", "json", "--timeout-s", str(budget.timeout_s), "--max-time-s", str(budget.max_time_s),
           "--warmup-s", str(budget.warmup_s),
           # the ceilings stage measured into this folder: without it each claim re-measures in its own budget
           "--ceilings", str(Path(ctx.results) / ".cache"),
           # a GPU claim runs one process (precision.MIN_PROCESSES); the CPU rehearsal takes that path, not a CPU's three
           *(("--repeat", "1") if ctx.device != "cuda" else ()), *extra]
    p = run_cmd(cmd, timeout_s=budget.hard_s, cwd=root, log=log)
    got = parse_outcomes(p.out)
    if got:
        return {**got[0], "seconds": p.seconds}
    why = "killed: over its hard limit" if p.timed_out else f"claimbench exited {p.rc} without JSON: {tail(p.text, 3)}"
    return {"claim": claim.stem, "status": "timeout" if p.timed_out else "error", "reason": why, "value": None,
            "ci": [None, None], "metric": None, "claimed": None, "record": None, "seconds": p.seconds}


def parse_outcomes(stdout: str) -> list[dict]:
    """The JSON list `claimbench run --format json` prints last; tolerant of stray lines before it."""
    text = stdout.strip()
    for start in [0] + [i for i in range(len(text)) if text.startswith("[", i) and (i == 0 or text[i - 1] == "\n")]:
        try:
            data = json.loads(text[start:])
        except ValueError:
            continue
        if isinstance(data, list) and all(isinstance(d, dict) for d in data):
            return data
    return []


def record_numbers(record_path: Optional[str]) -> dict:
    """Achieved GB/s and TFLOP/s from the record's bytes, flops and kernel median, as fractions of
    the ceilings measured in that same run (bandwidth; the matrix rate of the claim's dtype)."""
    rec = load_json(Path(record_path)) if record_path else None
    if not isinstance(rec, dict):
        return {}
    med = (rec.get("kernel") or {}).get("median_us")
    out = {"kernel_median_us": med, "baseline_median_us": (rec.get("baseline") or {}).get("median_us"),
           "floor_us": rec.get("floor_us"), "verdict": rec.get("verdict")}
    if not med:
        return out
    ceil = rec.get("ceilings") or {}
    dtype = (rec.get("precision") or {}).get("dtype") or ""
    nbytes, flops = rec.get("bytes"), rec.get("flops")
    if nbytes:
        out["gbps"] = nbytes / (med * 1e-6) / 1e9
        if ceil.get("bandwidth_gbps"):
            out["bw_frac"] = out["gbps"] / ceil["bandwidth_gbps"]
    if flops:
        out["tflops"] = flops / (med * 1e-6) / 1e12
        rate = _rate(ceil, dtype)
        if rate:
            out["rate_frac"] = out["tflops"] / rate
    if rec.get("floor_us"):
        out["sol"] = rec["floor_us"] / med
    bracket = ((rec.get("protocol") or {}).get("bracket") or {}).get("kernel") or {}
    if bracket:  # issue 11: the events against the orchestrator's wall-clock bracket of the same sample
        out["bracket"] = {"median_bracket_us": bracket.get("median_bracket_us"),
                          "median_event_us": bracket.get("median_side_us"), "median_gap_us": bracket.get("median_gap_us"),
                          "null_gap_us": (((rec.get("protocol") or {}).get("bracket") or {}).get("null_us") or {}).get("kernel")}
    return out


def _rate(ceil: dict, dtype: str) -> Optional[float]:
    if not ceil.get("matrix_tflops"):
        return None
    try:
        from claimbench.machine.ceilings import Ceilings, rate_tflops
        return rate_tflops(Ceilings.from_dict(ceil), dtype)[0]
    except (KeyError, TypeError, ValueError):
        return None


def outcome_line(o: dict, nums: dict) -> str:
    ci = o.get("ci") or [None, None]
    if o.get("value") is None:
        val = "-"
    elif ci[0] is None or ci[1] is None:
        val = f"{o['metric']} {o['value']:.4g} [no CI]"
    else:
        val = f"{o['metric']} {o['value']:.4g} [{ci[0]:.4g}, {ci[1]:.4g}]"
    claimed = "" if o.get("claimed") is None else f" (claimed {o['claimed']:g})"
    parts = [f"{o.get('claim')}: {o.get('status')}  {val}{claimed}"]
    if nums.get("gbps") is not None:
        parts.append(f"{nums['gbps']:.0f} GB/s" + (f" = {nums['bw_frac']:.2f} of bandwidth" if nums.get("bw_frac") else ""))
    if nums.get("tflops") is not None:
        parts.append(f"{nums['tflops']:.1f} TFLOP/s" + (f" = {nums['rate_frac']:.2f} of matmul rate" if nums.get("rate_frac") else ""))
    if nums.get("sol") is not None:
        parts.append(f"sol {nums['sol']:.2f}")
    b = nums.get("bracket") or {}
    if b.get("median_gap_us") is not None:
        parts.append(f"bracket {b['median_bracket_us']:.1f} us, events {b['median_event_us']:.1f} us, gap "
                     f"{b['median_gap_us']:.1f} us (null {b.get('null_gap_us') or 0:.1f} us)")
    parts.append(f"({o.get('seconds', 0):.0f} s)")
    return "  ".join(parts)


def proc_summary(p: Proc) -> str:
    return f"rc={p.rc}{' (timed out)' if p.timed_out else ''} in {p.seconds:.1f} s"
