"""What a record copies from its claim, and the digest that lets audit compare 100,000 of them."""

from __future__ import annotations

import recordkit as rk

from claimbench.store import claimcopy as C


def test_claim_copy_is_exactly_what_the_record_holds():
    claim = rk.load_claim(rk.FIXTURE, "softmax-online")
    copy = C.claim_copy(claim)
    assert sorted(copy) == ["claimed", "hardware_spec", "precision", "workload"]
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    assert {k: getattr(rec, k) for k in copy} == copy
    assert C.copy_digest_of(rec) == C.claim_digest(claim, "fo") == C.claim_digest(claim, C.copy_digest_of(rec))
    assert C.copy_digest_of(rec).startswith("fo:")


def test_copy_digest_names_its_json_method():
    claim = rk.load_claim(rk.FIXTURE, "softmax-online")
    copy, flops, nbytes = C.expected_copy(claim)
    assert C.copy_digest(copy, flops, nbytes, method="j").startswith("fj:")
    assert C.copy_digest({**copy, "workload": None}, flops, nbytes, method="j").startswith("pj:")
    assert C.claim_digest(claim, "pj") == C.copy_digest({**copy, "workload": None}, flops, nbytes, method="j")
