"""Property: whatever a record is edited into, publish never shows a number audit rejects.

Valid records are mutated field by field (one to three fields, any JSON value, hostile text
included), sometimes by a careful forger who then recomputes the verdict so the record agrees
with itself, and published with one to three numbers per entry (so a forged record may sit
below the limit, where publish does not recompute it, until a refusal moves it up). After `publish`, `audit` must find nothing wrong with any record the list links, and
nothing wrong with the list itself; neither may crash.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
import recordkit as rk
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claimbench.report.audit import audit
from claimbench.report.publish import publish
from claimbench.stats.verdict import decide
from claimbench.store.record import RecordError, parse_record

NOW = "2026-12-01T12:00:00.000000Z"
KEYS = ["softmax_h200", "softmax_h200_old", "gemm_h200", "bw_h200", "scan_h200", "blackwell_b200", "transpose_new",
        "transpose_old"]
FIELDS = [
    "verdict", "value", "ci_low", "ci_high", "published_value", "claim_id", "claim_path", "claim_sha256",
    "claimed.metric", "claimed.value", "claimed.tolerance", "precision.dtype", "hardware_spec.model",
    "hardware_spec.device", "workload.params.n", "workload.bytes", "flops", "bytes", "created_utc",
    "protocol_version", "schema_version", "git_dirty", "git_commit", "mode", "hardware.slug", "hardware.name",
    "hardware.gpus", "correctness.passed", "floor_us", "tensor_bytes", "outcome", "rejections", "blockers",
    "kernel.samples_us.0", "kernel.samples_us.7", "kernel.rounds.3", "kernel.processes.0", "kernel.rounds",
    "baseline.samples_us.2", "baseline.samples_us", "source_sha256", "hardware_match", "throttled_majority",
]
TEXT = st.sampled_from(["", "verified", "`", "-->", "<!--", "<script>x</script>", "[x](javascript:1)", "\u202e",
                        "\x1b[31m", "2099-01-01T00:00:00.000000Z", "zzzz", "speedup", "bogus", "claims/x.yaml",
                        "transpose-tiled", "0" * 64, "NVIDIA H200\n- x"])
SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6),
                   st.sampled_from([0.0, -1.0, 1e-300, 1e300, 9.99, 42.0, 0.5, 1.5, 2.0**31]),
                   st.floats(0.01, 1000, allow_nan=False), TEXT)
VALUE = st.one_of(SCALAR, st.lists(SCALAR, max_size=3), st.dictionaries(TEXT, SCALAR, max_size=2))


def _set(d, path: str, value) -> bool:
    *parents, last = path.split(".")
    target = d
    for p in parents:
        target = target[int(p)] if isinstance(target, list) else target.get(p)
        if not isinstance(target, (dict, list)):
            return False
    if isinstance(target, list):
        i = int(last)
        if i >= len(target):
            return False
        target[i] = value
    else:
        target[last] = value
    return True


def _redecide(d) -> None:
    try:
        v = decide(parse_record(d, "x").evidence())
    except (RecordError, ValueError, TypeError, KeyError):
        return
    d.update(verdict=v.status.value, reason=v.reason, value=v.value, ci_low=v.ci_low, ci_high=v.ci_high,
             published_value=v.published_value)


_BASE: list = []


def _fresh(tmp_path_factory):
    if not _BASE:
        _BASE.append(rk.standard_tree(tmp_path_factory.mktemp("base") / "proj"))
    root, recs = _BASE[0]
    dst = tmp_path_factory.mktemp("case") / "proj"
    shutil.copytree(root, dst)
    return dst, {k: dst / p.relative_to(root) for k, p in recs.items()}


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(FIELDS), VALUE), min_size=1, max_size=3),
       careful=st.booleans(), cap=st.integers(1, 3))
def test_publish_never_shows_a_number_audit_rejects(tmp_path_factory, edits, careful, cap):
    root, recs = _fresh(tmp_path_factory)
    for key, field, value in edits:
        path = recs[key]
        d = json.loads(path.read_text())
        if _set(d, field, value):
            if careful:
                _redecide(d)
            path.write_text(json.dumps(d, indent=1))
    plan = publish(root, root / "LIST.md", root / "results", now=NOW, max_per_entry=cap)
    problems = audit(root, root / "LIST.md", root / "results", workers=1, cache=False, now=NOW, max_per_entry=cap)
    listed = (root / "LIST.md").read_text(encoding="utf-8")
    shown = set(re.findall(r"\]\((results/records/[^)\s]+)\)", listed))
    assert {f"results/{n.record}" for n in plan.numbers} == shown
    rejected = {p.path for p in problems}
    assert not shown & rejected, [str(p) for p in problems if p.path in shown]
    assert not [p for p in problems if p.path == "LIST.md"], [str(p) for p in problems]
    for p in problems:
        assert "lacks the number from" not in p.message
