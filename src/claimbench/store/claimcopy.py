"""What a record copies from its claim, and how audit holds the record to it.

A record carries the sha256 of its claim file and a copy of the claim's blocks that decide its
number (`record.claim_copy`). A copy that differs from the claim file whose hash it carries is a
forgery, or a bug; either way the record does not stand. Comparing 100,000 records field by field
would cost seconds, so each record's copy is reduced to one digest when it is indexed, and only
a digest that differs is compared field by field, to name the field.
"""

from __future__ import annotations

import hashlib
from typing import Any, Optional

from claimbench.store.jsonio import CANONICAL, canonical_json
from claimbench.store.record import CLAIM_COPY, Record, claim_copy


def copy_digest(copy: dict, flops: Optional[float], nbytes: Optional[float], method: str = CANONICAL) -> Optional[str]:
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


def expected_copy(claim) -> Optional[tuple[dict, Optional[float], Optional[float]]]:
    """(`claim_copy`, flops, bytes) that a record of `claim` must hold; None when the claim's
    flops or bytes do not evaluate (it fails check, so no record of it can stand)."""
    from claimbench.spec import expr

    try:
        flops, nbytes = expr.workload_counts(claim.workload)
    except expr.ExprError:
        return None
    return claim_copy(claim), flops, nbytes


def claim_digest(claim, like: str, want: Optional[tuple] = None) -> Optional[str]:
    """The `copy_digest` a record of `claim` must carry, in the form of `like` (a record's digest:
    full or partial, and its JSON method); None when it cannot be computed here. ``want``: the
    claim's `expected_copy`, when the caller has it."""
    want = want if want is not None else expected_copy(claim)
    if want is None or len(like) < 2 or like[0] not in "fp" or like[1] not in "oj":
        return None
    copy, flops, nbytes = want
    if like[0] == "p":
        copy = {**copy, "hardware_spec": None, "workload": None}
    return copy_digest(copy, flops, nbytes, like[1])


def copy_differences(rec: "Record", copy: dict, flops: Optional[float], nbytes: Optional[float]) -> list[tuple[str, Any, Any]]:
    """(dotted field, record's value, claim's value) for each copied leaf that differs."""
    out: list = []
    full = rec.hardware_spec is not None and rec.workload is not None
    for key in CLAIM_COPY if full else ("claimed", "precision"):
        _diff(key, getattr(rec, key), copy.get(key), out)
    for key, have, want in (("flops", rec.flops, flops), ("bytes", rec.bytes, nbytes)):
        if have != want:
            out.append((key, have, want))
    return out


def _diff(key: str, have: Any, want: Any, out: list) -> None:
    if isinstance(have, dict) and isinstance(want, dict):
        for k in sorted(set(have) | set(want), key=str):
            _diff(f"{key}.{k}", have.get(k), want.get(k), out)
    elif have != want or type(have) is not type(want):
        out.append((key, have, want))
