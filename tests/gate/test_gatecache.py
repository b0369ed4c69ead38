"""gatecache: cached and parallel `check` gives exactly what `gateall.gate_all` gives."""

from __future__ import annotations

import shutil

import pytest
import recordkit as rk

from claimbench.gate import gatecache
from claimbench.gate.gateall import gate_all
from claimbench.spec.listing import parse_list
from claimbench.store.record import sha256_file

PATHS = ["claims/softmax-online.yaml", "claims/deepgemm-fp8.yaml", "claims/blackwell-time.yaml"]


@pytest.fixture
def root(tmp_path):
    return rk.copy_tree(tmp_path / "proj")


def listing(root):
    return parse_list((root / "LIST.md").read_text(), "LIST.md")


def sources(root):
    return {p: {"kernels/stubs.py": sha256_file(root / "kernels" / "stubs.py")} for p in PATHS}


def test_cached_equals_fresh(root):
    cache = root / "results" / ".cache"
    fresh = gate_all([root / p for p in PATHS], root, listing(root))
    first = gatecache.gate_cached(PATHS, root, listing(root), sources=sources(root), cache_dir=cache)
    assert list(cache.glob("check-*.json"))
    second = gatecache.gate_cached(PATHS, root, listing(root), sources=sources(root), cache_dir=cache)
    assert first == second == fresh
    assert all(r.ok for r in second)


def test_list_change_invalidates(root):
    cache = root / "results" / ".cache"
    gatecache.gate_cached(PATHS, root, listing(root), sources=sources(root), cache_dir=cache)
    lst = root / "LIST.md"
    lst.write_text(lst.read_text().replace("- DeepGEMM -", "- DeepGEMM v2 -"))
    again = gatecache.gate_cached(PATHS, root, listing(root), sources=sources(root), cache_dir=cache)
    assert [r.ok for r in again] == [True, False, True]
    assert again[1].problems[0].key == "entry"


def test_claim_or_source_change_invalidates(root):
    cache = root / "results" / ".cache"
    gatecache.gate_cached(PATHS, root, listing(root), sources=sources(root), cache_dir=cache)
    f = root / "claims" / "blackwell-time.yaml"
    f.write_text(f.read_text().replace("tolerance: 0.05", "tolerance: 1.5"))
    assert not gatecache.gate_cached(PATHS, root, listing(root), sources=sources(root), cache_dir=cache)[2].ok
    srcs = sources(root)
    srcs["claims/softmax-online.yaml"] = {"kernels/stubs.py": "0" * 64}
    (root / "kernels" / "stubs.py").write_text("def nothing():\n    pass\n")
    assert not gatecache.gate_cached(PATHS, root, listing(root), sources=srcs, cache_dir=cache)[0].ok


def test_duplicate_ids_are_caught_with_cached_results(root):
    cache = root / "results" / ".cache"
    (root / "claims" / "more").mkdir()
    shutil.copy(root / "claims" / "deepgemm-fp8.yaml", root / "claims" / "more" / "deepgemm-fp8.yaml")
    paths = PATHS + ["claims/more/deepgemm-fp8.yaml"]
    srcs = {**sources(root), paths[-1]: sources(root)[PATHS[1]]}
    for _ in range(2):  # cold, then every result from the cache
        out = gatecache.gate_cached(paths, root, listing(root), sources=srcs, cache_dir=cache)
        assert [r.ok for r in out] == [True, True, True, False]
        assert "is also the id of claims/deepgemm-fp8.yaml" in out[3].problems[-1].message


def test_parallel_matches_serial(root, monkeypatch):
    from claimbench.gate import gateall

    paths = sorted(f"claims/{p.name}" for p in (root / "claims").glob("*.yaml"))
    serial = gatecache.gate_cached(paths, root, listing(root))
    monkeypatch.setattr(gateall, "PARALLEL_FROM", 1)
    assert gatecache.gate_cached(paths, root, listing(root)) == serial
