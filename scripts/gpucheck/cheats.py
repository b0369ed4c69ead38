"""Stage `cheats`: the GPU cheat fixtures through the real runner (tests/test_gpu_cheats.py's
cases), and a direct probe of whether the harness's L2 reset matters.

The honest control runs first: if it does not verify, a refusal of the cheats proves nothing.
The probe times the L2-persisting kernel twice with claimbench's cold CUDA timer, once as the
harness does it (flush, then reset persisting lines) and once with the reset disabled, against
the measured bandwidth ceiling. If the window works, the second reads x from L2 and shows more
GB/s than HBM gives; the first must not. Both under the ceiling means the window had no effect
here: the cheat was not exercised. Note the harness flushes before it resets (timing_cuda.py
`_flush`); the reset is a host call, the flush a queued kernel, so which lands first is what
this probe measures.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from .stage_io import REFERENCE, Ctx, load_json, say, write_result

CONTROLS = ("honest", "gpu_honest_sync")  # honest kernels: the first must verify, the second must be timed


def _cases(ctx: Ctx):
    tests = str(Path(ctx.root) / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import test_gpu_cheats
    return test_gpu_cheats


def cheats_stage(ctx: Ctx) -> None:
    from claimbench.machine.detect import detect

    cases = _cases(ctx)
    work = Path(ctx.extra.get("work") or ctx.art_path)
    project = cases.make_project(work / "cheats-project")
    results = ctx.art_path / "cheats"
    hw = detect(project)
    device = ctx.device
    if device == "cuda" and hw.device != "cuda":
        write_result(ctx, "cheats", "fail", f"no CUDA device detected ({hw.name})")
        say("cheats: no CUDA device detected")
        return
    rows, skipped, bad = [], [], []
    names = list(cases.CASES)
    l2_ok, l2_why = cases.l2_window_api() if device == "cuda" else (False, "needs CUDA")
    for i, name in enumerate(names):
        c = cases.CASES[name]
        if device != "cuda" and not c.cpu_ok:
            skipped.append(name)
            say(f"cheat {name}: not run: needs CUDA (streams, the caching allocator, L2 persistence)")
            continue
        if name == "gpu_l2_persist" and not l2_ok:
            skipped.append(name)
            say(f"cheat {name}: not exercised: {l2_why}")
            continue
        left = ctx.left_s() - (8.0 if device == "cuda" else 0.0)  # keep some for the L2 probe
        least = 12.0 if device == "cuda" else 5.0
        if left < least:
            skipped.append(name)
            say(f"cheat {name}: skipped: budget ({left:.1f} s left)")
            continue
        per = min(left, max(least, left / (len(names) - i)))
        out = cases.run_case(project, hw, name, device, results, timeout_s=min(per, 150.0),
                             # a round costs about 1 s on the GPU (an 8.4M-element input and its check): the
                             # honest control needs three rounds to verify, so 0.5 s left it inconclusive
                             max_time_s=4.0 if device == "cuda" else 0.2, warmup_s=0.2 if device == "cuda" else 0.05,
                             repeat=1)  # a GPU claim's one process; the CPU rehearsal takes that path too
        if out.status.value == "timeout":  # the budget, not the cheat, ended it: no judgement
            skipped.append(name)
            say(f"cheat {name}: not judged: {out.reason[:200]}")
            continue
        ok, why = cases.judge(name, out)
        if not ok and name == "honest" and device != "cuda" and out.status.value in ("inconclusive", "refuted"):
            # a CPU rehearsal shows the path; a 2-core machine's noise decides the control's interval
            ok, why = True, f"{out.status.value} on CPU (noise, not a refusal; on the GPU it must verify): {out.reason[:160]}"
        if out.value is None:
            value = ""
        elif out.ci_low is None or out.ci_high is None:
            value = f" value {out.value:.4g} [no CI]"
        else:
            value = f" value {out.value:.4g} [{out.ci_low:.4g}, {out.ci_high:.4g}]"
        say(f"cheat {name}: {'OK' if ok else 'FAILED'} {why}{value}")
        rows.append({"case": name, "status": out.status.value, "ok": ok, "why": why, "value": out.value,
                     "ci": [out.ci_low, out.ci_high], "record": str(out.record_path) if out.record_path else None})
        if not ok:
            bad.append(name)
    probe = None
    if device == "cuda" and l2_ok and ctx.left_s() > 6.0:
        try:
            ceil = load_json(ctx.art_path / "ceilings.json") or {}
            probe = _l2_probe(Path(ctx.root), float(ceil.get("bandwidth_gbps") or REFERENCE["copy_gbps"]))
        except Exception as e:
            probe = {"error": f"{type(e).__name__}: {e}"}
            say(f"l2 probe: error {probe['error']}")
    elif device == "cuda":
        say(f"l2 probe: not run ({l2_why or 'budget'})")
    control_failed = "honest" in bad
    cheats = [r for r in rows if r["case"] not in CONTROLS]
    kept = len([r for r in cheats if r["ok"]])
    sync = next((r for r in rows if r["case"] == "gpu_honest_sync"), None)
    summary = (f"{kept}/{len(cheats)} cheats kept from verified as expected"
               + ("; CONTROL did not verify" if control_failed else "")
               + ("" if sync is None else f"; a synchronizing call {'timed' if sync['ok'] else 'NOT timed'}")
               + (f"; not run: {', '.join(skipped)}" if skipped else "")
               + (f"; unexpected: {', '.join(b for b in bad if b != 'honest')}" if [b for b in bad if b != "honest"] else "")
               + (f"; l2 probe: {probe['verdict']}" if probe and "verdict" in probe else ""))
    if bad or (probe and str(probe.get("verdict", "")).startswith("DEFENSE FAILS")):
        status = "fail"
    elif skipped or device != "cuda":
        status = "partial"
    else:
        status = "ok"
    write_result(ctx, "cheats", status, summary, {"cases": rows, "skipped": skipped, "l2_probe": probe})


def _l2_probe(root: Path, bandwidth_gbps: float) -> dict:
    """Kernel and baseline GB/s under the harness's cold timer, with and without the L2 reset."""
    import torch

    from claimbench.orchestrator.protocol import TimingConfig, measure_pair
    from claimbench.side.cuda_timer import CudaEventTimer

    path = root / "tests" / "fixtures" / "kernels" / "cheat" / "gpu_l2_persist.py"
    spec = importlib.util.spec_from_file_location("gpu_l2_persist_probe", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    rows, cols = 4096, 2048
    (x,) = mod.make_inputs(seed=1, device="cuda", dtype="float32", rows=rows, cols=cols)
    nbytes = 4 * rows * cols + 4 * rows
    l2 = int(torch.cuda.get_device_properties(0).L2_cache_size)
    cfg = TimingConfig(warmup_s=0.3, max_time_s=1.0)
    got = {}
    for label, resetter in (("harness", None), ("no_reset", lambda: None)):
        timer = CudaEventTimer(l2_bytes=l2, l2_resetter=resetter)
        pair = measure_pair(lambda: mod.kernel(x), lambda: mod.baseline(x), timer, config=cfg)
        got[label] = {"kernel_gbps": nbytes / pair.kernel.median_us / 1e3,
                      "baseline_gbps": nbytes / pair.baseline.median_us / 1e3,
                      "l2_reset_via": timer.l2_reset_via, "l2_reset": timer.l2_reset}
        say(f"l2 probe [{label}]: kernel {got[label]['kernel_gbps']:.0f} GB/s, baseline "
            f"{got[label]['baseline_gbps']:.0f} GB/s (reset via {timer.l2_reset_via}, active {timer.l2_reset})")
    gain = got["no_reset"]["kernel_gbps"] / got["harness"]["kernel_gbps"]
    over = {k: v["kernel_gbps"] / bandwidth_gbps for k, v in got.items()}
    if over["harness"] > 1.1:
        verdict = (f"DEFENSE FAILS: {over['harness']:.2f}x the {bandwidth_gbps:.0f} GB/s bandwidth ceiling "
                   "with the harness's flush and reset")
    elif over["no_reset"] > 1.1:
        verdict = (f"window works ({over['no_reset']:.2f}x the bandwidth ceiling without the reset) and the "
                   f"harness's reset removes it ({over['harness']:.2f}x)")
    else:
        verdict = (f"no window effect seen ({over['no_reset']:.2f}x the bandwidth ceiling without the reset): "
                   "the cheat was not exercised")
    say(f"l2 probe: {verdict}")
    return {**got, "gain_without_reset": gain, "bandwidth_gbps": bandwidth_gbps, "verdict": verdict}
