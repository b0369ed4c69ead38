"""record: atomic writes that never clobber, versions (migrate older, refuse newer), located errors."""

import json

import pytest

from claimbench.record import SCHEMA_VERSION, RecordError, load_record, parse_record, write_record


def _minimal(**kw):
    d = {"schema_version": SCHEMA_VERSION, "claim_id": "c", "created_utc": "2026-01-01T00:00:00.000000Z",
         "harness_version": "0", "claim_sha256": "0" * 64, "claim_path": "claims/c.yaml",
         "claimed": {"metric": "speedup", "value": 1.0, "tolerance": 0.1}, "verdict": "error", "reason": "r"}
    d.update(kw)
    return d


def test_roundtrip_and_no_clobber(tmp_path):
    r = parse_record(_minimal(), "x")
    p1 = write_record(tmp_path, r)
    p2 = write_record(tmp_path, r)
    assert p1 != p2 and p1.is_file() and p2.is_file()
    assert load_record(p1) == r
    assert not list(tmp_path.rglob(".tmp-*"))


def test_newer_schema_is_refused_and_older_is_migrated(tmp_path):
    with pytest.raises(RecordError, match="newer than this claimbench"):
        parse_record(_minimal(schema_version=SCHEMA_VERSION + 1), "x")
    old = _minimal(schema_version=1, kernel={"samples_us": [1.0, 2.0], "rounds": [0, 1]})
    old["status"] = old.pop("verdict")
    r = parse_record(old, "x")
    assert r.verdict == "error" and r.kernel.processes == [0, 0]


def test_corrupt_and_invalid_records_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 2, "claim_id": ')
    with pytest.raises(RecordError, match="bad.json"):
        load_record(bad)
    bad.write_text(json.dumps(_minimal(verdict=None)))
    with pytest.raises(RecordError, match="verdict"):
        load_record(bad)
