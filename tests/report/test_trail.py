"""provenance: the chain claim -> source -> records -> list, and one record made readable."""

from __future__ import annotations

import pytest
import recordkit as rk
from hypothesis import given, settings
from hypothesis import strategies as st

from claimbench.report.publish import publish
from claimbench.report.trail import show_provenance, show_record
from claimbench.store.record import RecordError


@pytest.fixture
def tree(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    publish(root, root / "LIST.md", root / "results")
    return root, recs


def test_chain_for_a_published_claim(tree):
    root, recs = tree
    text = show_provenance(root, "softmax-online")
    assert "paper: Fixture source for softmax-online <https://example.org/softmax-online> at Section 4" in text
    for key in ("softmax_h200_old", "softmax_h200", "softmax_h100", "softmax_gh200_stale", "softmax_cpu_skip"):
        assert recs[key].name in text
    assert "not current: stale hash: claims/softmax-online.yaml changed since the run" in text
    assert "shows on 'Foundational kernel exercises > Online Normalizer Calculation for Softmax' (line 11): 1.62× [1.61, 1.63]" in text
    assert "off for GH200 480GB: stale hash" in text
    # the reader's next step is printed under the number (issue 26)
    assert f"reproduce it: claimbench reproduce results/records/softmax-online/{recs['softmax_h200'].name}" in text


def test_chain_explains_a_superseded_number(tree):
    root, recs = tree
    text = show_provenance(root, "transpose-tiled")
    assert f"off for H200: superseded by the newer refuted record results/records/transpose-tiled/{recs['transpose_new'].name}" in text
    assert "shows on" not in text


def test_unknown_claim_says_so(tree):
    root, _ = tree
    text = show_provenance(root, "no-such-claim")
    assert "cannot read" in text and "records  0" in text


def test_record_readable(tree):
    _, recs = tree
    text = show_record(recs["softmax_h200"])
    assert "verdict    verified: speedup 1.6" in text
    assert "kernel    60 samples kept, 0 dropped for throttling; 12 rounds in 1 process(es)" in text
    assert "trial 3 seed 1022: passed" in text and "rel_l2 0.006" in text
    assert "hardware   H200 (nvidia-h200)" in text
    assert f"reproduce  or         claimbench reproduce {recs['softmax_h200']}" in text
    assert "reproduce  run        git checkout --detach" in text
    assert all(len(line) < 200 for line in text.splitlines() if not line.lstrip().startswith(("sources", "software")))


def test_failed_correctness_is_shown_per_trial(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    path = rk.write(root, rk.build(root, "softmax-online", kernel_us=150, baseline_us=240, correctness_passed=False))
    text = show_record(path)
    assert "verdict    incorrect" in text and "correctness FAILED" in text
    assert "trial 1 seed 1000: FAILED rel L2 error 0.3 > max_rel_l2 0.01" in text


def test_record_shows_software_and_cores(tree):
    _, recs = tree
    text = show_record(recs["softmax_h200"])
    assert "  machine    H200; cpu Fixture CPU: 2 cores, 1 used by the claim's process" in text
    assert "  software   python 3.11, torch 2.13" in text
    assert "  gpu        0: NVIDIA H200, cc 9.0, 132 SMs" in text


def test_record_text_is_terminal_safe(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    rec = rk.build(root, "softmax-online", kernel_us=150, baseline_us=240)
    # a machine name that is not printable ASCII is refused when read (no machine reports one)
    hw = {**rec.hardware, "name": "H200\x1b]0;owned\x07", "gpus": [{"name": "\u202eH200"}]}
    with pytest.raises(RecordError, match="not printable ASCII"):
        show_record(rk.write(root, rec.model_copy(update={"hardware": hw})))
    # text that may hold any character is shown safely
    path = rk.write(root, rec.model_copy(update={"reason": rec.reason + " \x1b]0;owned\x07 \u202eH200",
                                                 "created_utc": "2026-11-01T11:00:00.000000Z"}))
    text = show_record(path)
    assert "\x1b" not in text and "\x07" not in text and "\u202e" not in text
    assert "\ufffd]0;owned\ufffd" in text


def test_a_number_without_a_floor_says_none_applied(tmp_path):
    """Issue 22: a number no physics check stood behind says so, with why."""
    root = rk.copy_tree(tmp_path / "proj")
    rec = rk.build(root, "softmax-online", kernel_us=150, baseline_us=240)
    no_flops = rec.model_copy(update={"floor_us": 0.0, "floor_term": "no flops declared: compute floor 0"})
    assert "floor      none applied: no flops declared" in show_record(rk.write(root, no_flops))
    unmeasured = rec.model_copy(update={"floor_us": None, "floor_term": ""})
    assert "floor      none applied: the claim declares neither" in show_record(rk.write(root, unmeasured))


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=80),
                     lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
                     max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(correctness=st.dictionaries(st.sampled_from(["trials", "passed", "reason", "null_models"]), _JSON),
       trials=st.lists(st.dictionaries(st.sampled_from(["seed", "passed", "reason", "outputs"]), _JSON), max_size=3))
def test_any_shape_of_correctness_is_shown_as_rows(correctness, trials):
    """`correctness` is free-form in a record: whatever JSON it holds, the trials read as rows of
    short text, never a traceback (the site and `show --record` both read them this way)."""
    from claimbench.report.trail import trial_rows

    for block in (correctness, {**correctness, "trials": trials}):
        for row in trial_rows(block):
            assert isinstance(row.passed, bool) and len(row.seed) <= 30 and len(row.reason) <= 200
            assert all(len(v) <= 60 for out in row.outputs for _, v in out)
