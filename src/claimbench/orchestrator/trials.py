"""Correctness before any number: fresh inputs per trial, the kernel checked against the reference.

Everything here happens in the orchestrator, on bytes it read out of the sides: the kernel's
outputs, the baseline's, and the task side's float64 reference. The reference must be finite
wherever the baseline's own output is; null models run on every trial, so a tolerance cannot
mean something for the first inputs only.
"""

from __future__ import annotations

import random
from typing import Any, Callable, Optional

import numpy as np

from claimbench.orchestrator import messages as m
from claimbench.orchestrator.job import Correctness
from claimbench.orchestrator.ranked import tagged
from claimbench.orchestrator.session import ClaimEnded, ClaimSession, InputSet
from claimbench.orchestrator.unread import overcount, unread_inputs
from claimbench.spec import memory
from claimbench.verify import accuracy, codec, nullmodels


def shapes(claim, measured: bool) -> list[dict]:
    """The params to check: the measured shape first when measured, then each check shape over it; never empty."""
    base = dict(claim.workload.params)
    checks = [{**base, **c} for c in claim.workload.check_params]
    return ([base] if measured else []) + checks or [base]


def seed_check(s: ClaimSession, claim, seeds: list[int], *, measured: bool, coord=None) -> list[str]:
    """Rejects a claim whose `make_inputs` gives identical inputs for two seeds: a kernel could replay them.
    With several ranks every rank returns every rank's findings."""
    params = shapes(claim, measured)[0]
    a, b = s.make_inputs(seeds[0], params), s.make_inputs(seeds[1], params)
    same = all((x is None and y is None) or (x is not None and y is not None and x.tobytes() == y.tobytes())
               for x, y in zip(a.raw, b.raw)) and a.items == b.items
    s.drop(a)
    s.drop(b)
    mine = ["make_inputs ignores its seed: two seeds gave identical inputs, so a kernel could replay them"] if same else []
    return tagged(coord.gather(mine)) if coord is not None and coord.world > 1 else mine


def run_trials(s: ClaimSession, claim, *, device: str, dtype: str, seeds: list[int], measured: bool,
               say: Callable[[str], None], coord=None) -> tuple[Correctness, list[str]]:
    """(the correctness result, rejections). Stops at the first trial with a rejection;
    with several ranks, every rank decides that from every rank's findings, so all stop together."""
    plan = shapes(claim, measured)
    steps = [(plan[0], seed, f"trial {i + 1}/{len(seeds)}") for i, seed in enumerate(seeds)]
    steps += [(p, seeds[0] + 7919 * (j + 1), f"check shape {j + 1}/{len(plan) - 1} {p}") for j, p in enumerate(plan[1:])]
    trials: list[dict] = []
    rejections: list[str] = []
    # the unread-bytes probe (orchestrator/unread.py) at a check shape when the claim is measured: a full-size
    # reference per input is the expensive kind
    # (one rank alone: each rank's reference may be a collective, and the ranks would have to agree
    # on every probe; multi-rank claims keep the verdict's own rule, bytes against their tensors)
    probe_at = (len(seeds) if measured and len(plan) > 1 else 0) if coord is None or coord.world == 1 else -1
    for k, (params, seed, label) in enumerate(steps):
        say(f"correctness: {label}")
        row, rej = _trial(s, claim, device, dtype=dtype, params=params, seed=seed, first=k == 0, probe=k == probe_at,
                          own=k < len(seeds))
        if coord is not None and coord.world > 1:
            rej = tagged([r for _, r in coord.gather((None, rej))])
        trials.append(row)
        rejections += rej
        if rej:
            break
    if "batch-invariant" in claim.correctness.properties and not rejections:
        say("correctness: batch invariance")
        trials.append(_batch_invariance(s, plan[0], seeds[0], dtype=dtype))
    failed = [t for t in trials if not t["passed"]]
    reason = "" if not failed else f"trial {trials.index(failed[0]) + 1} {failed[0]['params']}: {failed[0]['reason']}"
    passed = not failed and not rejections
    note = f"{len(trials)} checks passed ({device}, {dtype})" if passed else reason
    return Correctness(passed=passed if not rejections else None, reason=note, trials=tuple(trials)), rejections


def _trial(s: ClaimSession, claim, device: str, *, dtype: str, params: dict, seed: int, first: bool,
           probe: bool = False, own: bool = False) -> tuple[dict, list[str]]:
    """One trial; ``own``: at the claim's own params (the seeds' trials), where the check must mean something."""
    corr, rej = claim.correctness, []
    inputs = s.make_inputs(seed, params)
    row: dict[str, Any] = {"seed": seed, "params": params, "dtype": dtype}
    kops = s.give("kernel", inputs)
    kprep = claim.kernel.prepare is not None
    before = _operand_bytes(s, "kernel") if (kprep or device != "cpu") else None
    if kprep and own:
        assert before is not None
        found = passed_through(inputs, kops.prepared, before)
        s.passthrough = found if s.passthrough is None else {i: j for i, j in found.items() if s.passthrough.get(i) == j}
    called = s.call("kernel", m.Call(trace=first))
    rej += list(called.problems)
    if first:
        row["ops"] = list(called.ops)[:200]
    outs = s.outputs("kernel", called)
    out_dtypes = [b.dtype for b in called.outputs]
    after = _operand_bytes(s, "kernel") if before is not None else None
    if before is not None:
        assert after is not None
        mutated = any(x is not None and y is not None and x.tobytes() != y.tobytes() for x, y in zip(before, after))
    else:
        mutated = any(b is not None and r is not None and b.view.tobytes() != r.tobytes()
                      for b, r in zip(kops.buffers, inputs.raw))
    if mutated:
        rej.append("the kernel changed its inputs; it must leave them as they were")
    if _aliases(called.outputs, kops.prepared):
        rej.append("the kernel returned a view of its operands; outputs must be allocated by the kernel")
    if "deterministic" in corr.properties:
        s.release("kernel")
        again = s.call("kernel", m.Call(again=True))
        twice = s.outputs("kernel", again)
        row["deterministic"] = all(accuracy.bitwise_equal(a, b) for a, b in zip(outs, twice))
    s.release("kernel")
    s.give("baseline", inputs)
    bcalled = s.call("baseline", m.Call())
    bouts = s.outputs("baseline", bcalled)
    expect = [b.dtype for b in bcalled.outputs]
    s.release("baseline")
    ref = s.reference(inputs)
    _reference_is_finite(ref, bouts)
    if own and (why := _vacuous(ref)) is not None:
        rej.append(why)
    if (why := memory.declared_mismatch(claim, params, dtype=dtype, operand_bytes=inputs.nbytes(),
                                        output_elements=sum(int(r.size) for r in ref))) is not None:
        rej.append(why)
    row.update(_compare_all(outs, ref, corr, dtypes=out_dtypes, expect=expect))
    if probe and claim.workload.bytes and row["passed"]:
        unread = unread_inputs(s, inputs, ref, rng=random.SystemRandom())
        row["unread_inputs"] = unread
        if (why := overcount(claim, params, inputs, unread=unread, out_dtypes=out_dtypes, ref=ref)) is not None:
            rej.append(why)
    if kprep and _prepared_answer(after or [], inputs, ref, corr=corr):
        rej.append("the kernel's operands already hold the answer: `prepare` must not compute it")
    base = _compare_all(bouts, ref, corr, dtypes=expect, expect=None)
    row["baseline_rel_l2"] = [o.get("rel_l2") for o in base["outputs"]]
    if not base["passed"]:
        shape = "shape" in base["reason"] or "outputs, the reference has" in base["reason"]
        fix = ("fix the baseline: its output does not have the reference's shape" if shape
               else "fix the claim's reference or tolerances")
        rej.append(f"the baseline disagrees with the reference ({base['reason']}); {fix}")
    if row.get("deterministic") is False:
        row.update(passed=False, reason="not deterministic: two calls on the same operands differ bitwise")
    nm = nullmodels.null_models(ref, corr, _precision_for_nulls(claim.precision.dtype, dtype, expect))
    row["null_models"] = nm
    passing = [k for k, v in nm.items() if v]
    if passing:
        rej.append(f"the tolerances are too loose: {nullmodels.explain(passing)} passes them")
    s.drop(inputs)
    return row, rej


def _vacuous(ref: list[np.ndarray]) -> Optional[str]:
    """Why a reference at the claim's own params can tell no answer from another, or None. With no
    output elements every comparison passes having compared nothing; with every element zero, an
    all-zero answer passes every bound (the null models leave out a model equal to the reference).
    A check shape may be an empty or all-zero edge case; the claim's own params may not."""
    if not sum(int(r.size) for r in ref):
        return ("nothing was compared: the reference has no output elements at the claim's params; the task's "
                "reference and the kernel must return what the claim computes")
    if not any(np.count_nonzero(r) for r in ref):
        return ("the reference is all zeros at the claim's params, so an all-zero answer passes every check; "
                "make_inputs must give inputs whose answer is not all zero")
    return None


def _precision_for_nulls(claim_dtype: str, run_dtype: str, out_dtypes: list[str]) -> Optional[str]:
    """The precision the lower-precision null model rounds below: the claim's own; for an integer
    or quantized claim, its output's, unless it is checked at another dtype (then none)."""
    if claim_dtype in nullmodels.LOWER:
        return claim_dtype
    if run_dtype != claim_dtype:
        return None
    return out_dtypes[0] if out_dtypes and out_dtypes[0] in nullmodels.LOWER else None


def _operand_bytes(s: ClaimSession, role: str) -> list[Optional[np.ndarray]]:
    shown = s.exchange(role, m.ShowOperands(), expect=m.Prepared)[0]
    return [s.read_raw(role, b) if b is not None else None for b in shown.operands]


def passed_through(inputs: InputSet, prepared: list, raw: list[Optional[np.ndarray]]) -> dict[int, int]:
    """input index -> the operand that `prepare` made of it unchanged: the same dtype, shape and
    bytes, laid out contiguously (the timed rounds write their changes into it element by element).
    Read from the operands' bytes here, never from the kernel's word; an input two operands copy
    goes to the first."""
    out: dict[int, int] = {}
    taken: set[int] = set()
    for i, (it, data) in enumerate(zip(inputs.items, inputs.raw)):
        if not isinstance(it, m.TensorItem) or data is None or not data.size:
            continue
        for j, (b, got) in enumerate(zip(prepared, raw)):
            if (j in taken or b is None or got is None or b.dtype != it.dtype or list(b.shape) != list(it.shape)
                    or not codec.is_contiguous(list(b.shape), list(b.strides))):
                continue
            if got.size == data.size and got.tobytes() == data.tobytes():
                out[i] = j
                taken.add(j)
                break
    return out


def _aliases(outs: list[m.Buffer], operands: list) -> bool:
    """An output's span (from its shape and strides, as it is decoded) meets an operand's storage
    or span. The operand pages themselves are checked from outside (`ClaimSession.placed`); this
    covers what `prepare` made, which lives in the kernel's own memory."""
    spans = [s for b in operands if b is not None for s in ((b.storage[0], b.storage[0] + b.storage[1]), _span(b))]
    for o in outs:
        lo, hi = _span(o)
        if hi > lo and any(lo < b_hi and b_lo < hi for b_lo, b_hi in spans if b_hi > b_lo):
            return True
    return False


def _span(b: m.Buffer) -> tuple[int, int]:
    return b.ptr, b.ptr + codec.span_bytes(b.dtype, b.shape, b.strides)


def _reference_is_finite(ref: list[np.ndarray], bouts: list[np.ndarray]) -> None:
    for i, (r, b) in enumerate(zip(ref, bouts)):
        if r.shape != b.shape:
            continue
        bad = int(np.count_nonzero(~np.isfinite(r) & np.isfinite(b)))
        if bad:
            raise ClaimEnded("error", f"correctness.reference output {i} is NaN or Inf at {bad} elements where the "
                             "baseline's output is finite; a reference must be finite there")


def _compare_all(outs, refs, corr, *, dtypes, expect) -> dict:
    if len(outs) != len(refs):
        return {"passed": False, "reason": f"{len(outs)} outputs, the reference has {len(refs)}", "outputs": []}
    rows = [accuracy.compare(o, r, corr, out_dtype=dtypes[i], expect_dtype=None if expect is None else expect[i])
            for i, (o, r) in enumerate(zip(outs, refs))]
    bad = [f"output {i}: {row['reason']}" for i, row in enumerate(rows) if not row["passed"]]
    return {"passed": not bad, "reason": "; ".join(bad), "outputs": rows}


def _prepared_answer(prepared: list, inputs: InputSet, ref: list[np.ndarray], *, corr) -> bool:
    """True when an operand `prepare` made matches a reference output that is not simply an input."""
    decoded_inputs = [codec.from_bytes(raw, it.dtype, it.shape) for it, raw in zip(inputs.items, inputs.raw)
                      if raw is not None]
    for r in ref:
        if any(x.shape == r.shape and accuracy.compare(x, r, corr, quick=True)["passed"] for x in decoded_inputs):
            continue
        for raw in prepared:
            if raw is None:
                continue
            if raw.size == r.size * 8 and accuracy.compare(raw.view(np.float64).reshape(r.shape), r, corr, quick=True)["passed"]:
                return True
            for dt, size in (("float32", 4), ("float16", 2), ("bfloat16", 2)):
                if raw.size == r.size * size:
                    if accuracy.compare(codec.from_bytes(raw, dt, list(r.shape)), r, corr, quick=True)["passed"]:
                        return True
    return False


def _batch_invariance(s: ClaimSession, params: dict, seed: int, *, dtype: str) -> dict:
    """Each row alone, in the full batch, and at another position: bitwise the same."""
    inputs = s.make_inputs(seed, params)
    s.give("kernel", inputs)
    row = {"seed": seed, "params": params, "dtype": dtype, "property": "batch-invariant"}
    prepared = s.operands["kernel"].prepared
    n = prepared[0].shape[0] if prepared and prepared[0] is not None and prepared[0].shape else 0
    if n < 2:
        return {**row, "passed": False, "reason": "batch invariance needs a batch of at least 2 rows along dim 0"}
    full = s.outputs("kernel", s.call("kernel", m.Call()))[0]
    s.release("kernel")
    shifted = s.outputs("kernel", s.call("kernel", m.Call(variant=m.Variant(roll=True))))[0]
    s.release("kernel")
    for i in sorted({0, n // 2, n - 1}):
        one = s.outputs("kernel", s.call("kernel", m.Call(variant=m.Variant(row=i))))[0]
        s.release("kernel")
        if not accuracy.bitwise_equal(one[0], full[i]):
            return {**row, "passed": False, "reason": f"row {i} alone differs bitwise from row {i} in the batch of {n}"}
        j = (i + 1) % n
        if not accuracy.bitwise_equal(shifted[j], full[i]):
            return {**row, "passed": False, "reason": f"row {i} moved to position {j} differs bitwise"}
    s.drop(inputs)
    return {**row, "passed": True, "reason": ""}
