"""index: the sidecar summary is a cache that is always checked against the record files."""

from __future__ import annotations

import json
import os

import pytest
import recordkit as rk

from claimbench.store import index as ix


@pytest.fixture
def tree(tmp_path):
    return rk.standard_tree(tmp_path / "proj")


def test_runner_appends_and_reader_trusts_matching_lines(tree):
    root, recs = tree
    idx = ix.read_index(root / "results")
    assert idx.reread == 0 and len(idx.summaries) == len(recs)
    s = next(s for s in idx.summaries if s.path.endswith(recs["softmax_h200"].name))
    assert (s.claim_id, s.hardware, s.hardware_name, s.verdict, s.metric, s.dtype) == (
        "softmax-online", "nvidia-h200", "H200", "verified", "speedup", "bfloat16")
    assert s.sha256 == rk.sha256_file(recs["softmax_h200"]) and s.source_sha256


def test_missing_index_is_rebuilt_and_written(tree):
    root, recs = tree
    (root / "results" / ix.INDEX_NAME).unlink()
    idx = ix.read_index(root / "results")
    assert idx.reread == len(recs)
    assert len((root / "results" / ix.INDEX_NAME).read_text().splitlines()) == len(recs)
    assert ix.read_index(root / "results").reread == 0


def test_changed_deleted_and_torn_lines_are_repaired(tree):
    root, recs = tree
    d = json.loads(recs["transpose_new"].read_text())
    d["reason"] = d["reason"] + " (edited)"
    recs["transpose_new"].write_text(json.dumps(d))
    recs["scan_h200"].unlink()
    with open(root / "results" / ix.INDEX_NAME, "a") as f:
        f.write('{"v": 1, "path": "records/x/half')
    idx = ix.read_index(root / "results")
    assert idx.reread == 1 and len(idx.summaries) == len(recs) - 1
    edited = next(s for s in idx.summaries if s.path.endswith(recs["transpose_new"].name))
    assert edited.reason.endswith("(edited)")
    assert ix.read_index(root / "results").reread == 0


def test_a_line_that_is_not_utf8_costs_only_its_own_record(tree):
    """Before, one such byte made the whole index unreadable and every record was read again."""
    root, recs = tree
    index = root / "results" / ix.INDEX_NAME
    lines = index.read_bytes().splitlines(keepends=True)
    lines[0] = lines[0].replace(b'"claim_id":"', b'"claim_id":"\xff', 1)
    index.write_bytes(b"".join(lines))
    idx = ix.read_index(root / "results")
    assert idx.reread == 1 and len(idx.summaries) == len(recs)
    assert ix.read_index(root / "results").reread == 0


def test_corrupt_record_gets_an_error_summary(tree):
    root, recs = tree
    recs["bw_h200"].write_bytes(b"\xff\xfe not json")
    idx = ix.read_index(root / "results")
    (bad,) = idx.corrupt
    assert bad.claim_id == "softmax-online-bw" and "corrupt or truncated JSON" in bad.error
    assert len(idx.good) == len(recs) - 1


def test_parallel_rebuild_matches_serial(tree, monkeypatch):
    root, _ = tree
    (root / "results" / ix.INDEX_NAME).unlink()
    serial = ix.read_index(root / "results", repair=False, workers=1).summaries
    monkeypatch.setattr(ix, "_PARALLEL_MIN", 1)
    parallel = ix.read_index(root / "results", repair=False, workers=2).summaries
    assert parallel == serial


def test_append_index_records_file_identity(tmp_path):
    root = rk.copy_tree(tmp_path / "proj")
    rec = rk.build(root, "blackwell-time", hw="nvidia-b200", kernel_us=12.3)
    path = rk.write(root, rec)
    (line,) = (root / "results" / ix.INDEX_NAME).read_text().splitlines()
    d = json.loads(line)
    assert d["path"] == path.relative_to(root / "results").as_posix()
    assert (d["size"], d["mtime_ns"]) == (os.stat(path).st_size, os.stat(path).st_mtime_ns)


def test_fresh_clone_mtimes_are_settled_by_sha256(tree):
    root, recs = tree
    for p in recs.values():
        os.utime(p, ns=(1, 1))  # as after a git checkout: same bytes, new mtime
    d = json.loads(recs["bw_h200"].read_text())
    d["reason"] = d["reason"].upper()  # same size, different bytes
    recs["bw_h200"].write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
    os.utime(recs["bw_h200"], ns=(1, 1))
    idx = ix.read_index(root / "results")
    assert idx.reread == 1
    assert next(s for s in idx.summaries if s.path.endswith(recs["bw_h200"].name)).reason.isupper()
    assert all(s.mtime_ns == 1 for s in idx.summaries)
    assert ix.read_index(root / "results").reread == 0
