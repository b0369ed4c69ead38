"""What a record copies from its claim, and how audit holds the record to it.

A record carries the sha256 of its claim file and a copy of the claim's blocks that decide its
number (`claim_copy`). A copy that differs from the claim file whose hash it carries is a
forgery, or a bug; either way the record does not stand. Comparing 100,000 records field by field
would cost seconds, so each record's copy is reduced to one digest when it is indexed, and only
a digest that differs is compared field by field, to name the field.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from claimbench.store.jsonio import CANONICAL, canonical_json
from claimbench.store.record import CLAIM_COPY, Record, same_value

# claim keys added after records began copying `hardware`: copied only when a claim sets them, so
# every record made before they existed still copies its claim exactly (and keeps its digest)
ADDED_HARDWARE_KEYS = ("nvlink",)
ADDED_WORKLOAD_KEYS = ("sweep", "memory")


def claim_copy(claim) -> dict:
    """Exactly the fields a record copies from its claim (`Record` keys, JSON values); the runner
    passes them to `Record`, and audit compares them with the claim file the record names."""
    unset = {k for k in ADDED_HARDWARE_KEYS if getattr(claim.hardware, k) is None}
    unswept = {k for k in ADDED_WORKLOAD_KEYS if getattr(claim.workload, k) is None}
    return {"claimed": claim.claimed.model_dump(mode="json"), "precision": claim.precision.model_dump(mode="json"),
            "hardware_spec": claim.hardware.model_dump(mode="json", exclude=unset),
            "workload": claim.workload.model_dump(mode="json", exclude=unswept)}


def copy_digest(copy: dict, flops: Optional[float], nbytes: Optional[float], *, method: str = CANONICAL) -> Optional[str]:
    """One digest of what a record copied from its claim (and the flops and bytes computed from
    it), prefixed with what it covers and how it was written: `f` every block, `p` the blocks a
    migrated record has (no hardware_spec or workload); then the JSON method. None when this
    process cannot write that method."""
    spec, work = copy.get("hardware_spec"), copy.get("workload")
    full = spec is not None and work is not None
    body = [copy.get("claimed"), copy.get("precision"), spec, work, flops, nbytes] if full else \
        [copy.get("claimed"), copy.get("precision"), flops, nbytes]
    raw = canonical_json(body, method)
    return None if raw is None else f"{'f' if full else 'p'}{method}:" + hashlib.sha256(raw).hexdigest()[:24]


def copy_digest_of(rec: "Record") -> str:
    """`copy_digest` of a record's own copy."""
    digest = copy_digest({"claimed": rec.claimed, "precision": rec.precision, "hardware_spec": rec.hardware_spec,
                          "workload": rec.workload}, rec.flops, rec.bytes)
    assert digest is not None  # CANONICAL is always a method this process can write
    return digest


def expected_copy(claim, at: Optional[tuple[str, Any]] = None) -> Optional[tuple[dict, Optional[float], Optional[float]]]:
    """(`claim_copy`, flops, bytes) that a record of `claim` must hold, at the sweep point ``at``
    ((axis, value); None: the claim's own params); None when the claim's flops or bytes do not
    evaluate (it fails check, so no record of it can stand) or ``at`` is not one of its off points."""
    from claimbench.spec import expr

    if at is not None and not on_sweep(claim, at):
        return None
    try:
        flops, nbytes = expr.workload_counts(claim.workload, dict([at]) if at else None)
    except expr.ExprError:
        return None
    return claim_copy(claim), flops, nbytes


def on_sweep(claim, at: tuple[str, Any]) -> bool:
    """Whether (axis, value) is one of the claim's sweep points other than its own params (a value
    of another type is another point: 4096 is not 4096.0)."""
    sweep = claim.workload.sweep or {}
    axis, value = at
    return axis in sweep and not same_value(value, claim.workload.params[axis]) and \
        any(same_value(v, value) for v in sweep[axis])


def point_of(rec: "Record") -> Optional[tuple[str, Any]]:
    """A record's sweep point as (axis, value); None for a record of its claim's own params."""
    return None if rec.sweep_point is None else (rec.sweep_point.axis, rec.sweep_point.value)


def record_differences(rec: "Record", claim) -> list[tuple[str, Any, Any]]:
    """`copy_differences` of a record against ``claim`` at the record's own point; a point the
    claim does not sweep is itself the difference."""
    at = point_of(rec)
    if at is not None and not on_sweep(claim, at):
        sweep = claim.workload.sweep
        return [("sweep_point", f"{at[0]}={at[1]!r}",
                 f"sweep {sweep}" if sweep else "no sweep (the claim measures its params only)")]
    want = expected_copy(claim, at)
    if want is None:
        return [("workload", "counts at its params", "flops or bytes that do not evaluate")]
    copy, flops, nbytes = want
    return copy_differences(rec, copy, flops, nbytes=nbytes)


def claim_digest(claim, like: str, want: Optional[tuple] = None, *, at: Optional[tuple[str, Any]] = None) -> Optional[str]:
    """The `copy_digest` a record of `claim` must carry, in the form of `like` (a record's digest:
    full or partial, and its JSON method), at the sweep point ``at``; None when it cannot be
    computed here. ``want``: the claim's `expected_copy` at that point, when the caller has it."""
    want = want if want is not None else expected_copy(claim, at)
    if want is None or len(like) < 2 or like[0] not in "fp" or like[1] not in "oj":
        return None
    copy, flops, nbytes = want
    if like[0] == "p":
        copy = {**copy, "hardware_spec": None, "workload": None}
    return copy_digest(copy, flops, nbytes, method=like[1])


def copy_differences(rec: "Record", copy: dict, flops: Optional[float], *, nbytes: Optional[float]) -> list[tuple[str, Any, Any]]:
    """(dotted field, record's value, claim's value) for each copied leaf that differs."""
    out: list = []
    full = rec.hardware_spec is not None and rec.workload is not None
    for key in CLAIM_COPY if full else ("claimed", "precision"):
        _diff(key, getattr(rec, key), copy.get(key), out=out)
    for key, have, want in (("flops", rec.flops, flops), ("bytes", rec.bytes, nbytes)):
        if have != want:
            out.append((key, have, want))
    return out


def _diff(key: str, have: Any, want: Any, *, out: list) -> None:
    if isinstance(have, dict) and isinstance(want, dict):
        for k in sorted(set(have) | set(want), key=str):
            _diff(f"{key}.{k}", have.get(k), want.get(k), out=out)
    elif have != want or type(have) is not type(want):
        out.append((key, have, want))
