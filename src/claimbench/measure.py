"""The timed part of a claim, inside the child: rounds, re-checks, ceilings, the floor inputs.

Between rounds the operand buffers keep their addresses but get new contents, so a kernel that
caches by pointer, shape or call count returns stale answers; a sampled output of every round
is checked against a reference computed only after that round's calls are done. Where the
operands are the inputs themselves (no `prepare`), one element of every floating-point operand
also changes before every kernel sample, at a position nobody can predict, so a cache keyed on
a cheap fingerprint of the contents goes stale too.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import torch

from . import guard, verify
from .timing import TimingConfig, make_timer, measure_pair


class RecheckHooks:
    def __init__(self, session, params: dict, kops: tuple, bops: tuple, seed: int) -> None:
        self.s, self.params, self.kops, self.bops, self.seed = session, params, kops, bops, seed
        self.rng = random.Random(seed)
        self.pristine: tuple | None = None
        self.held: list = []
        self.pick = 0
        self.count = 0
        self.checked = 0
        self.failures: list[str] = []
        self.calls = 1
        c = session.claim
        # multi-rank references combine every rank's inputs, which one rank's edits would not match
        self.perturb = not (c.kernel.prepare or c.baseline.prepare) and c.hardware.count == 1
        self.perturbed = 0

    def before_round(self, r: int) -> None:
        self.finish_round()
        inputs = self.s.inputs(self.seed + 104729 * (r + 1), self.params)
        kn, bn = self.s.operands(inputs)
        for dst, src in list(zip(self.kops, kn)) + list(zip(self.bops, bn)):
            if isinstance(dst, torch.Tensor):
                with torch.no_grad():
                    torch.Tensor.copy_(dst, src)
        self.pristine = verify.clone_all(inputs)
        self.pick = self.rng.randrange(max(1, self.calls))
        self.count = 0

    def before_sample(self, side: str, r: int) -> None:
        """Change one unpredictable element of each floating-point operand (outside the timed
        region), mirrored in the baseline's operands and in the pristine copy."""
        if side != "kernel" or not self.perturb or self.pristine is None:
            return
        with torch.no_grad():
            for i, t in enumerate(self.kops):
                if not (isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel() and t.is_contiguous()):
                    continue
                idx = self.rng.randrange(t.numel())
                for buf in (t, self.bops[i], self.pristine[i]):
                    if isinstance(buf, torch.Tensor) and buf.is_contiguous() and buf.numel() == t.numel():
                        flat = buf.view(-1)
                        flat[idx] = -flat[idx] - 1
                self.perturbed += 1

    def after_sample(self, side: str, r: int, out: Any) -> None:
        outs = verify.outputs(out) if out is not None else ()
        if side == "kernel":
            if self.count == self.pick:
                self.held.append((tuple(t.detach().clone() for t in outs), verify.clone_all(self.pristine)))
            self.count += 1
        verify.poison(outs)

    def finish_round(self) -> None:
        if self.pristine is None or not self.held:
            return
        for outs, inputs in self.held:
            ref = self.s.ref(inputs, last_use=True)  # this copy was made for this check alone
            res = verify.compare_all(outs, ref, self.s.claim.correctness)
            self.checked += 1
            if not res["passed"]:
                self.failures.append(res["reason"])
            verify.poison(outs, ref)
        self.held = []


def measure_claim(s, job: dict) -> dict:
    claim, device = s.claim, s.device
    params = dict(claim.workload.params)
    seed = job["seeds"]["timing"]
    inputs = s.inputs(seed, params)
    kops, bops = s.operands(inputs)
    out_k = verify.outputs(s.kernel(*kops))
    tensor_bytes = verify.nbytes(inputs) + verify.nbytes(out_k)
    verify.poison(out_k)
    del out_k
    cfg = TimingConfig.for_device(device, **{k: v for k, v in job.get("timing", {}).items() if v is not None})
    timer_kw = {}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        timer_kw["l2_bytes"] = int(getattr(props, "L2_cache_size", 50 << 20))
        gpu0 = ((job.get("hardware") or {}).get("gpus") or [{}])[0]
        if gpu0.get("max_sm_clock_mhz"):
            timer_kw["max_sm_clock_mhz"] = gpu0["max_sm_clock_mhz"]
        from .detect import Nvml
        timer_kw["nvml"] = Nvml.open()  # throttle reasons and clocks per sample; None without NVML
        if gpu0.get("nvml_index") is not None:
            timer_kw["nvml_index"] = gpu0["nvml_index"]
    timer = make_timer(device, cfg, **timer_kw)
    hooks = RecheckHooks(s, params, kops, bops, seed)
    hooks.calls = cfg.calls_per_round
    threads_before = set(threading.enumerate())
    s.say("warm-up")
    pair = measure_pair(lambda: s.kernel(*kops), lambda: s.baseline(*bops), timer, cfg, hooks=hooks,
                        progress=lambda phase, detail: s.say(f"{phase}: {detail}"))
    hooks.finish_round()
    rejections = [f"kernel {t}" for t in guard.new_threads(threads_before)]
    if hooks.failures:
        rejections.append(f"timed calls returned wrong answers ({len(hooks.failures)} of {hooks.checked} checked): {hooks.failures[0]}")
    if device == "cuda":
        from .timing_cuda import check_streams
        ok, why = check_streams(lambda: s.kernel(*kops))
        if not ok:
            rejections.append(why)
    out = {"timing": pair.to_dict(), "tensor_bytes": float(tensor_bytes), "measure_rejections": rejections,
           "timed_checks": {"checked": hooks.checked, "failed": len(hooks.failures), "perturbed": hooks.perturbed}}
    out["autotune"] = autotune_choices(s)
    return out


def autotune_choices(s) -> dict:
    """The configs Triton's autotuners picked, keyed by kernel: part of the protocol record."""
    import sys
    out = {}
    for mod in list(sys.modules.values()):
        if not (getattr(mod, "__name__", "") or "").startswith("kernels"):
            continue
        for name, obj in list(vars(mod).items()):
            cache = getattr(obj, "cache", None)
            if type(obj).__name__ == "Autotuner" and isinstance(cache, dict) and cache:
                out[f"{mod.__name__}.{name}"] = {str(k): str(v) for k, v in list(cache.items())[:8]}
    return out
