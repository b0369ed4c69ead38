"""One claim inside the child process: inputs, correctness trials, and the timed rounds.

The kernel runs first on every set of inputs; the baseline and the reference run after it on
pristine copies, and each of their outputs is poisoned before it is freed. During timing the
operand buffers keep their addresses while their contents are rewritten every round, and
sampled outputs of the timed calls are checked against a reference computed after the round.
"""

from __future__ import annotations

import gc as _gc
from typing import Any, Callable

import torch

from . import guard, verify

DTYPES = {"float64": torch.float64, "float32": torch.float32, "tf32": torch.float32,
          "float16": torch.float16, "bfloat16": torch.bfloat16}


class Session:
    def __init__(self, claim, root, device: str, dtype: str, load: Callable, progress: Callable) -> None:
        self.claim, self.device, self.dtype, self.say = claim, device, dtype, progress
        c = claim
        self.make_inputs = load(root, c.workload.inputs)
        self.kernel = load(root, c.kernel.impl)
        self.baseline = load(root, c.baseline.impl)
        self.kprep = load(root, c.kernel.prepare) if c.kernel.prepare else None
        self.bprep = load(root, c.baseline.prepare) if c.baseline.prepare else None
        ref = c.correctness.reference
        self.reference = None if ref == "baseline-float64" else load(root, ref)
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        torch.backends.cudnn.allow_tf32 = dtype == "tf32"
        # torch and the claim's modules are a few hundred thousand long-lived objects: out of the
        # collector's sight, the collection after every trial takes milliseconds, not ~0.1 s.
        _gc.freeze()

    # -- inputs ---------------------------------------------------------------------------
    def inputs(self, seed: int, params: dict) -> tuple:
        got = self.make_inputs(seed=seed, device=self.device, dtype=self.dtype, **params)
        return tuple(got) if isinstance(got, (tuple, list)) else (got,)

    def operands(self, inputs: tuple) -> tuple[tuple, tuple]:
        k = self.kprep(*verify.clone_all(inputs)) if self.kprep else verify.clone_all(inputs)
        b = self.bprep(*verify.clone_all(inputs)) if self.bprep else verify.clone_all(inputs)
        as_t = lambda x: tuple(x) if isinstance(x, (tuple, list)) else (x,)  # noqa: E731
        return as_t(k), as_t(b)

    def ref(self, pristine: tuple, *, last_use: bool = False) -> tuple:
        """The float64 answer, copied to the CPU; the device copy is poisoned before it is freed.

        ``last_use``: nothing reads ``pristine`` afterwards, so the reference gets it without a copy."""
        if self.reference is not None:
            out = self.reference(*(pristine if last_use else verify.clone_all(pristine)))
        else:
            ops = pristine if last_use else verify.clone_all(pristine)
            ops = self.bprep(*ops) if self.bprep else ops
            ops = tuple(o.to(torch.float64) if isinstance(o, torch.Tensor) and o.is_floating_point() else o
                        for o in (ops if isinstance(ops, (tuple, list)) else (ops,)))
            out = self.baseline(*ops)
        outs = verify.outputs(out)
        kept = tuple(t.detach().to("cpu", torch.float64).clone() for t in outs)
        verify.poison(outs)
        return kept

    def static_and_seed_checks(self, seeds: list[int]) -> list[str]:
        params = self._shapes(measured=False)[0]
        a, b = self.inputs(seeds[0], params), self.inputs(seeds[1], params)
        if verify.same_contents(a, b):
            return ["make_inputs ignores its seed: two seeds gave identical inputs, so a kernel could replay them"]
        return []

    def _shapes(self, measured: bool) -> list[dict]:
        base = dict(self.claim.workload.params)
        checks = [{**base, **c} for c in self.claim.workload.check_params]
        return ([base] if measured else []) + checks or [base]

    # -- correctness ----------------------------------------------------------------------
    def correctness(self, seeds: list[int], *, measured: bool) -> dict:
        corr = self.claim.correctness
        trials, rejections, first = [], [], True
        shapes = self._shapes(measured)
        plan = [(shapes[0], s) for s in seeds] + [(p, seeds[0] + 7919 * (i + 1)) for i, p in enumerate(shapes[1:])]
        for k, (params, seed) in enumerate(plan):
            self.say(f"correctness trial {k + 1}/{len(plan)} {params}")
            row, rej = self._trial(params, seed, traced=first, null=first)
            first = False
            trials.append(row)
            rejections += rej
            if rej:
                break
        if "batch-invariant" in corr.properties and not rejections:
            row = self._batch_invariance(shapes[0], seeds[0])
            trials.append(row)
        failed = [t for t in trials if not t["passed"]]
        reason = "" if not failed else f"trial {trials.index(failed[0]) + 1} {failed[0]['params']}: {failed[0]['reason']}"
        passed = not failed and not rejections
        note = f"{len(trials)} checks passed ({self.device}, {self.dtype})" if passed else reason
        return {"passed": passed if not rejections else None, "reason": note, "trials": trials, "rejections": rejections}

    def _trial(self, params: dict, seed: int, *, traced: bool, null: bool) -> tuple[dict, list[str]]:
        corr, rej = self.claim.correctness, []
        inputs = self.inputs(seed, params)
        pristine = verify.clone_all(inputs)
        kops, bops = self.operands(inputs)
        # without a prepare, the kernel's operands are copies of the inputs: pristine is their "before"
        kops_before = verify.clone_all(kops) if self.kprep is not None else pristine
        row: dict[str, Any] = {"seed": seed, "params": params, "dtype": self.dtype}
        if traced:
            out, problems, ops = guard.traced_call(self.kernel, kops, forbidden=corr.forbidden, baseline=self.baseline)
            row["ops"] = ops[:200]
            rej += problems
        else:
            out = self.kernel(*kops)
        self._sync()
        try:
            outs = verify.outputs(out)
        except verify.NotATensor as e:
            return {**row, "passed": False, "reason": str(e)}, [f"kernel {e}"]
        if verify.aliases(outs, kops):
            rej.append("kernel returned a view of its operands; outputs must be allocated by the kernel")
        if not verify.same_contents(kops, kops_before) or not verify.same_contents(inputs, pristine):
            rej.append("kernel mutated its inputs; it must leave them as they were")
        if "deterministic" in corr.properties:
            # the same contents again, never pristine itself: without a prepare, the operands were
            # just checked unchanged; with one, kops_before is a copy nothing reads afterwards
            again = verify.outputs(self.kernel(*(kops_before if self.kprep is not None else kops)))
            self._sync()
            row["deterministic"] = all(verify.bitwise_equal(a, b) for a, b in zip(outs, again))
            verify.poison(again)
        held = tuple(t.detach().clone() for t in outs)
        verify.poison(outs)
        del out, outs
        bout = verify.outputs(self.baseline(*bops))
        self._sync()
        expect = tuple(t.dtype for t in bout)
        bheld = tuple(t.detach().to("cpu").clone() for t in bout)
        verify.poison(bout)
        del bout
        ref = self.ref(pristine, last_use=self.kprep is None)  # with a prepare, the operand check reads pristine
        row.update(verify.compare_all(held, ref, corr, expect))
        if self.kprep is not None and self._prepared_answer(kops, pristine, ref):
            rej.append("the kernel's operands already hold the answer: `prepare` must not compute it")
        base_check = verify.compare_all(bheld, ref, corr)
        row["baseline_rel_l2"] = [o.get("rel_l2") for o in base_check["outputs"]]
        if not base_check["passed"]:
            rej.append(f"the baseline disagrees with the reference ({base_check['reason']}); fix the claim's reference or tolerances")
        if row.get("deterministic") is False:
            row.update(passed=False, reason="not deterministic: two calls on the same operands differ bitwise")
        if null:
            claim_dtype = self.claim.precision.dtype
            if claim_dtype not in verify.LOWER_BY_NAME and self.dtype != claim_dtype:
                claim_dtype = "skip"  # a quantized claim checked at check_dtype: its output precision is the GPU's
            nm = verify.null_models(ref, corr, expect, claim_dtype)
            row["null_models"] = nm
            passing = [k for k, v in nm.items() if v]
            if passing:
                rej.append(f"tolerances too loose: the null model(s) {', '.join(passing)} pass them")
        verify.poison(held, bheld, ref)
        del held, bheld, ref
        _gc.collect()
        return row, rej

    def _prepared_answer(self, kops: tuple, inputs: tuple, ref: tuple) -> bool:
        """True when an operand made by `prepare` matches a reference output that is not simply
        one of the inputs (a copy's answer is its input; a one-key attention's is V)."""
        corr = self.claim.correctness

        def matches(t, r) -> bool:
            return isinstance(t, torch.Tensor) and t.shape == r.shape and verify.compare(t, r, corr)["passed"]
        for r in ref:
            if any(matches(x, r) for x in inputs):
                continue
            if any(matches(op, r) for op in kops):
                return True
        return False

    def _batch_invariance(self, params: dict, seed: int) -> dict:
        """Each row alone, in the full batch, and at another position: bitwise the same."""
        inputs = self.inputs(seed, params)
        kops, _ = self.operands(inputs)
        n = kops[0].shape[0] if kops and isinstance(kops[0], torch.Tensor) and kops[0].dim() >= 1 else 0
        row = {"seed": seed, "params": params, "dtype": self.dtype, "property": "batch-invariant"}
        if n < 2:
            return {**row, "passed": False, "reason": "batch-invariance needs a batch of at least 2 rows along dim 0"}
        full = verify.outputs(self.kernel(*kops))[0].detach().clone()
        # only the first operand is the batch: weights and tables are shared by every row
        perm = torch.roll(torch.arange(n), 1)
        rolled = (kops[0][perm.to(kops[0].device)].contiguous(),) + tuple(kops[1:])
        shifted = verify.outputs(self.kernel(*rolled))[0].detach()
        for i in sorted({0, n // 2, n - 1}):
            one = verify.outputs(self.kernel(kops[0][i:i + 1].contiguous(), *kops[1:]))[0].detach()
            if not verify.bitwise_equal(one[0], full[i]):
                return {**row, "passed": False, "reason": f"row {i} alone differs bitwise from row {i} in the batch of {n}"}
            j = (i + 1) % n
            if not verify.bitwise_equal(shifted[j], full[i]):
                return {**row, "passed": False, "reason": f"row {i} moved to position {j} differs bitwise"}
        return {**row, "passed": True, "reason": ""}

    def _sync(self) -> None:
        if self.device == "cuda":
            torch.cuda.synchronize()

    # -- timing ---------------------------------------------------------------------------
    def measure(self, job: dict) -> dict:
        from .measure import measure_claim
        return measure_claim(self, job)

