"""Stages `repeat` and `claims`: `claimbench run` as a user runs it, one process per claim.

`repeat` runs one claim three times (twice in a CPU rehearsal) and reports the spread of the measured value (target 2%).
Its records go to this run's artifacts, not results/records: they are evidence about the
harness, not the claim's published number. `claims` runs every CUDA claim that fits this
machine, in the order given, each with a share of the time left; claims that no longer fit are
listed so a second run can take them (`--claims`).
"""

from __future__ import annotations

import fnmatch
import statistics
from pathlib import Path
from typing import Optional

import yaml

from .cbrun import claim_budget, outcome_line, record_numbers, run_claim
from .stage_io import Ctx, load_json, say, write_result

REPEATS = 3
SPREAD_TARGET = 0.02
DEFAULT_REPEAT_CLAIM = "claims/matmul-grouped-4096-vs-cublas.yaml"  # short child: 16M-element outputs
MIN_CLAIM_S = 30.0
DRY_CLAIMS = ("softmax-online-vs-torch", "scan-lookback-cupy")      # Triton and CuPy CPU paths


def spread(values: list[float]) -> Optional[float]:
    """(max - min) / median of the measured values; None with fewer than two."""
    xs = [v for v in values if v is not None]
    if len(xs) < 2:
        return None
    return (max(xs) - min(xs)) / statistics.median(xs)


def repeat_stage(ctx: Ctx) -> None:
    root = Path(ctx.root)
    if ctx.device == "cuda":
        claim = root / (ctx.repeat_claim or DEFAULT_REPEAT_CLAIM)
        run_root = root
    else:  # rehearsal: an honest CPU claim in a throwaway project, so there is a number to spread
        from .cheats import _cases
        cases = _cases(ctx)
        run_root = cases.make_project(Path(ctx.extra.get("work") or ctx.art_path) / "repeat-project")
        claim = cases.write_claim(run_root, "honest", "cpu")
        say(f"repeat: dry run: a CPU fixture claim ({claim.name}) stands in for {ctx.repeat_claim or DEFAULT_REPEAT_CLAIM}")
    if not claim.is_file():
        write_result(ctx, "repeat", "fail", f"{claim}: no such claim")
        say(f"repeat: {claim}: no such claim")
        return
    outs = []
    # a rehearsal's second run already takes every path a spread takes (a third is 4 s more of CI)
    repeats = REPEATS if ctx.device == "cuda" else 2
    for i in range(repeats):
        least = MIN_CLAIM_S / 2 if ctx.device == "cuda" else 6.0
        if ctx.left_s() < least:
            say(f"repeat {i + 1}/{repeats}: skipped: budget ({ctx.left_s():.0f} s left)")
            break
        b = claim_budget(min(ctx.left_s(), max(least, ctx.left_s() / (repeats - i))), ctx.device)
        o = run_claim(ctx, claim, ctx.art_path / "repeat", b, root=run_root,
                      log=ctx.art_path / f"repeat-{i + 1}.log",
                      extra=() if ctx.device == "cuda" else ("--repeat", "1"))  # a rehearsal needs the path, not a number
        outs.append(o)
        say(f"repeat {i + 1}/{repeats}: " + outcome_line(o, record_numbers(o.get("record"))))
    values = [o.get("value") for o in outs]
    s = spread(values)
    met = s is not None and s <= SPREAD_TARGET and len([v for v in values if v is not None]) == repeats
    shown = "-" if s is None else f"{s * 100:.2f}%"
    say(f"repeat: {claim.stem}: values {[None if v is None else round(v, 4) for v in values]}, spread {shown} "
        f"(target <= {SPREAD_TARGET:.0%})")
    if s is None and (ctx.device == "cuda" or not any(v is not None for v in values)):
        status = "fail"  # on the GPU, fewer than two numbers; on a rehearsal, not one
    elif s is None:
        status = "partial"  # a rehearsal on a loaded CPU: the budget ended it after one number
    elif len(outs) < repeats:
        status = "partial"
    else:
        status = "ok" if met else "miss"
    write_result(ctx, "repeat", status, f"{claim.stem}: spread {shown} over {len(outs)} runs (target <= 2%)",
                 {"claim": str(claim), "outcomes": outs, "spread": s})


def select_claims(root: Path, patterns: tuple[str, ...]) -> list[tuple[Path, dict]]:
    """CUDA claims in claims/, in the order of `patterns` (ids or globs), else alphabetical."""
    found = []
    for path in sorted((root / "claims").glob("*.yaml")):
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            data = {}
        if ((data.get("hardware") or {}).get("device")) == "cuda":
            found.append((path, data))
    if not patterns:
        return found
    out = []
    for pat in patterns:
        for path, data in found:
            if fnmatch.fnmatch(path.stem, pat) and all(p != path for p, _ in out):
                out.append((path, data))
    return out


def _fits(data: dict, hw) -> tuple[bool, str]:
    from claimbench.machine.hardware import matches
    from claimbench.spec.claim import HardwareSpec
    try:
        spec = HardwareSpec.model_validate(data.get("hardware") or {})
    except Exception as e:  # the runner will reject it with the exact reason: let it
        return True, f"hardware spec does not parse ({type(e).__name__})"
    return matches(spec, hw)


def claims_stage(ctx: Ctx) -> None:
    from claimbench.machine.hardware import Hardware

    root = Path(ctx.root)
    saved = load_json(ctx.art_path / "hardware.json")
    if saved:
        hw = Hardware.from_dict(saved)
    else:
        from claimbench.machine.detect import detect
        hw = detect(root)  # this process then holds no CUDA context while the claims run
    chosen = select_claims(root, ctx.claims)
    todo, not_run = [], []
    for path, data in chosen:
        ok, why = _fits(data, hw)
        if ok:
            todo.append(path)
        else:
            not_run.append((path.stem, why))
    if ctx.device != "cuda":
        pick = [p for p in todo + [root / "claims" / f"{c}.yaml" for c, _ in not_run] if p.stem in DRY_CLAIMS]
        pick = sorted(set(pick), key=lambda p: DRY_CLAIMS.index(p.stem))
        say(f"claims: dry run: {len(chosen)} CUDA claims selected; running {len(pick)} of them correctness-only on CPU "
            f"({', '.join(p.stem for p in pick)}) to exercise the path")
        todo, not_run = pick, [(c, why) for c, why in not_run if c not in DRY_CLAIMS]
    from .plan import cost, order
    costs = {p: cost(p) for p in todo}
    if ctx.device == "cuda" and not ctx.claims:  # no order asked for: the cheapest and most certain first
        todo = [p for p, _ in order(todo)]
    for p in todo:
        c = costs[p]
        say(f"claims plan: {p.stem}: about {c.total_s:.0f} s (start {c.startup_s:.0f}, verification "
            f"{c.verification_s:.0f}, timing {c.timing_s:.0f}){'' if c.certain else ', less certain (CuPy or two GPUs)'}")
    by_reason: dict[str, list[str]] = {}
    for cid, why in not_run:
        by_reason.setdefault(why, []).append(cid)
    for why, ids in by_reason.items():
        say(f"claims not for this machine ({why}): {', '.join(ids)}")
    rows, left_over = [], []
    min_s = MIN_CLAIM_S if ctx.device == "cuda" else 10.0
    for i, path in enumerate(todo):
        if ctx.left_s() < min_s:
            left_over = [p.stem for p in todo[i:]]
            break
        want = 1.5 * costs[path].total_s if ctx.device == "cuda" else ctx.left_s() / (len(todo) - i)
        b = claim_budget(min(ctx.left_s(), max(min_s, want)), ctx.device)  # from its estimated cost, not a share
        o = run_claim(ctx, path, Path(ctx.results), b, log=ctx.art_path / "claims" / f"{path.stem}.log")
        nums = record_numbers(o.get("record"))
        rows.append({**o, **nums, "budget": b.__dict__})
        say("claim " + outcome_line(o, nums) + ("" if o.get("status") == "verified" else f"\n    reason: {str(o.get('reason'))[:300]}"))
    if left_over:
        say(f"claims: budget spent; not run ({len(left_over)}): --claims {','.join(left_over)}")
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    summary = (f"{len(rows)} run: " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
               + (f"; not run for budget: {','.join(left_over)}" if left_over else "")
               + (f"; not for this machine: {len(not_run)}" if not_run else ""))
    if ctx.device != "cuda":
        status = "partial"
    elif not rows:
        status = "skipped"
    else:
        status = "partial" if left_over else "ok"
    write_result(ctx, "claims", status, summary, {"rows": rows, "left_over": left_over, "not_run": not_run})
