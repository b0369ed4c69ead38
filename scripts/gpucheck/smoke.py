"""Stage `smoke`, first and under a minute: the three GPU paths nothing has exercised on a GPU yet,
once each, so a broken path costs the first minute of a 15-minute window, not all of it.

1. The profiler's stream check (`side/cuda_timer.check_streams`): every CUDA claim ends with it,
   and an exception there turns a finished claim into an error. One tiny kernel through it.
2. The cold timer (`measure_pair` with `CudaEventTimer`: flush, persisting-line reset, spin
   before the start event) on the same kernel.
3. One small claim end to end through `claimbench run`, as a user runs it: the honest GPU cheat
   control (`tests/test_gpu_cheats.py`), a 256x4096 softmax whose inputs and checks take seconds.

A stage that fails here stops the run (`gpu_check.py`): the rest of the window is for fixing and
rerunning. The CPU rehearsal fakes only what needs a GPU, each fake named in the output: the
stream check reads a synthetic activity list (CUPTI has no CPU activities), the timer is the CPU
timer, and the claim is checked on CPU.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from .stage_io import Ctx, say, write_result

CLAIM_S = {"cuda": 40.0, "cpu": 25.0}  # the claim's share: a `claimbench run` child and its rounds


def _tiny(device: str) -> Callable[[], Any]:
    from .workloads import FIDELITY, build

    fn, _ = build(FIDELITY[0], device)
    return fn


def _streams(device: str, fn: Callable[[], Any]) -> tuple[bool, str]:
    """The stream check on one call; on CPU, on a named synthetic activity list instead."""
    from claimbench.side.cuda_timer import check_streams, stream_check

    if device == "cuda":
        return check_streams(fn)
    # fake (CUPTI needs a GPU): one kernel on the timed stream inside the markers' window
    ok, why = stream_check(10.0, [(7, 100.0, 108.0)], 7, window=(99.0, 110.0))
    caught, _ = stream_check(10.0, [(7, 100.0, 108.0), (8, 101.0, 140.0)], 7, window=(99.0, 110.0))
    if caught:
        return False, "the synthetic side-stream activity was not caught"
    return ok, f"(fake: synthetic activities, CUPTI needs a GPU) {why}".strip()


def smoke_stage(ctx: Ctx) -> None:
    from .cbrun import claim_budget, outcome_line, record_numbers, run_claim
    from .cheats import _cases
    from .fidelity import _claimbench_us

    device, checks = ctx.device, []
    t0 = time.monotonic()
    try:
        fn = _tiny(device)
        fn()
        checks.append(("kernel", True, f"the tiny Triton kernel ran on {device}"))
    except Exception as e:
        checks.append(("kernel", False, f"{type(e).__name__}: {e}"))
        fn = None
    if fn is not None:
        try:
            ok, why = _streams(device, fn)
            checks.append(("profiler", ok, why or "one call, no work outside the timed stream"))
        except Exception as e:  # what a claim's last step would have raised
            checks.append(("profiler", False, f"{type(e).__name__}: {e}"))
        try:
            got = _claimbench_us(fn, device, 0.2, 1.0, {})
            ok = bool(got.get("median_us")) and got.get("samples", 0) > 0
            checks.append(("timer", ok, f"cold median {got.get('median_us') or 0:.2f} us over {got.get('samples')} "
                                        f"samples ({'CUDA events' if device == 'cuda' else 'fake: the CPU timer'}), "
                                        f"{got.get('dropped_throttled') or 0} dropped for clocks"))
        except Exception as e:
            checks.append(("timer", False, f"{type(e).__name__}: {e}"))
    for name, ok, why in checks:
        say(f"smoke {name}: {'ok' if ok else 'FAILED'}: {why}")
    claim_ok = False
    if all(ok for _, ok, _ in checks):
        cases = _cases(ctx)
        project = cases.make_project(Path(ctx.extra.get("work") or ctx.art_path) / "smoke-project")
        claim = cases.write_claim(project, "honest", device)
        if device != "cuda":
            from .env_ceilings import rehearsal_ceilings

            c = rehearsal_ceilings(ctx, project)
            say(f"smoke ceilings: (fake: a small CPU measurement, cached for the rehearsal's claims) "
                f"bandwidth ceiling {c.bandwidth_gbps:.0f} GB/s")
        per = min(CLAIM_S[device], max(10.0, ctx.left_s() - 2.0))
        o = run_claim(ctx, claim, ctx.art_path / "smoke", claim_budget(per, device), root=project,
                      log=ctx.art_path / "smoke-claim.log")
        # on a GPU the control must verify; on a CPU rehearsal any finished verdict shows the path works
        want = {"verified"} if device == "cuda" else {"verified", "inconclusive", "refuted", "skipped"}
        claim_ok = o.get("status") in want
        say(f"smoke claim: {'ok' if claim_ok else 'FAILED'}: " + outcome_line(o, record_numbers(o.get("record")))
            + ("" if claim_ok else f"\n    reason: {str(o.get('reason'))[:300]}"))
        checks.append(("claim", claim_ok, f"{o.get('status')}: {str(o.get('reason'))[:120]}"))
    else:
        say("smoke claim: not run: a path it needs failed above")
        checks.append(("claim", False, "not run"))
    bad = [n for n, ok, _ in checks if not ok]
    summary = (f"all {len(checks)} paths work in {time.monotonic() - t0:.0f} s" if not bad
               else f"FAILED: {', '.join(bad)}: " + "; ".join(w for n, ok, w in checks if not ok)[:240])
    write_result(ctx, "smoke", "fail" if bad else ("ok" if device == "cuda" else "partial"), summary,
                 {"checks": [{"name": n, "ok": ok, "why": w} for n, ok, w in checks]})
