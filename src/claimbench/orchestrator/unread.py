"""Bytes a claim counts that its work never needs (issue 22: "bytes that are never read").

A GB/s number is bytes / time, and a floor is bytes / bandwidth, so the bytes a claim declares
must be what the work has to move. A claim counting a 40 MB input its kernel never touches reached
59.9 GB/s against a measured 15.9 GB/s copy ceiling, and no floor caught it: the inputs and
outputs fitted in twice the cache, where no memory floor applies. The byte count is checked here
against the tensors instead, whatever the cache:

- an input is *unread* when no change to it changes the reference's outputs: the orchestrator
  changes it in elements that meet every index of every axis (the timed rounds' own perturbation,
  `orchestrator/perturb.py`), then, if nothing changed, sets those elements to a large positive and then a
  large negative value (so a max, a min, a threshold or a routing decision sees them); the
  reference is the claim's own float64 function, run by the task side on a copy;
- the work must move at most each needed input once and each output once, so the declared bytes
  may not exceed their sum at the same shape. A claim above it is rejected, naming the input.

Integer inputs (indices, lengths, block tables) are always counted as read: changing them could
make the reference fail rather than tell. A reference that fails on the probe's values counts the
input as read. The probe runs once per claim, at its first check shape, so it costs three
references per floating input at most, at a size the trials already use. Multi-rank claims are not
probed (each rank's reference may be a collective, so every rank would have to make the same
probes in step); the verdict's rule, declared bytes against the measured tensors, still holds them.
"""

from __future__ import annotations

import random
from typing import Optional

import numpy as np

from claimbench.orchestrator import messages as m
from claimbench.orchestrator import perturb
from claimbench.orchestrator.session import ClaimEnded, ClaimSession, InputSet
from claimbench.spec import expr
from claimbench.verify import codec

FINITE_MAX = {"float16": 6.0e4, "float8_e4m3fn": 440.0, "float8_e5m2": 5.0e4}  # below each format's largest


def unread_inputs(s: ClaimSession, inputs: InputSet, ref: list[np.ndarray], *, rng: random.Random) -> list[int]:
    """Positions of the floating-point inputs whose changes never changed a reference output."""
    out = []
    for i, (it, raw) in enumerate(zip(inputs.items, inputs.raw)):
        if not isinstance(it, m.TensorItem) or it.dtype not in codec.FLOATING or raw is None or not raw.size:
            continue
        if not any(_changes(s, inputs, ref, edit=edit) for edit in _probes(i, it, raw, rng=rng)):
            out.append(i)
    return out


def _probes(i: int, it: m.TensorItem, raw: np.ndarray, *, rng: random.Random):
    """The perturbation's own edit, then the same elements set to +big and to -big."""
    yield perturb.plan_edit(i, it, raw, rng=rng)
    idx = perturb.spread(it.shape, rng)
    values = codec.from_bytes(raw.tobytes(), it.dtype, [raw.size // codec.itemsize(it.dtype)])
    finite = np.abs(values[np.isfinite(values)])
    big = min(1.0 + 2.0 * float(finite.max()) if finite.size else 1.0, FINITE_MAX.get(it.dtype, 1e30))
    for v in (big, -big):
        data = codec.encode_element(v, it.dtype) * len(idx)
        yield m.Edit(operand=i, indices=idx.astype("<i8").tobytes().hex(), raw=data.hex())


def _changes(s: ClaimSession, inputs: InputSet, ref: list[np.ndarray], *, edit: m.Edit) -> bool:
    try:
        again = s.reference(inputs, [edit])
    except ClaimEnded:  # the reference failed on the probe's values: it read them
        return True
    return len(again) != len(ref) or any(a.shape != r.shape or a.tobytes() != r.tobytes() for a, r in zip(again, ref))


def overcount(claim, params: dict, inputs: InputSet, *, unread: list[int], out_dtypes: list[str],
              ref: list[np.ndarray]) -> Optional[str]:
    """Why the claim's declared bytes exceed what its work must move at ``params``; None when not."""
    if not claim.workload.bytes:
        return None
    try:
        declared = float(expr.evaluate(claim.workload.bytes, dict(params)))
    except expr.ExprError:
        return None  # check refuses such a claim; nothing to compare here
    needed = sum(int(raw.size) for i, raw in enumerate(inputs.raw) if raw is not None and i not in unread)
    needed += sum(int(r.size) * codec.itemsize(dt) for r, dt in zip(ref, out_dtypes) if dt in codec.STORAGE)
    if declared <= needed * (1 + 1e-9):
        return None
    why = "; ".join(f"input {i} ({inputs.items[i].dtype} {list(inputs.items[i].shape)}) never changed the reference's "
                    "outputs when perturbed" for i in unread[:3])
    return (f"workload.bytes counts {declared:.6g} B at {params}, more than the {needed:.6g} B its needed inputs and "
            f"its outputs hold{': ' + why if why else ''}; a claim's bytes are what the work must move (each input it "
            "reads and each output once): count only those")
