"""orchestrator/sweep.py: the cache sweep a CPU sample starts with, sized from sysfs."""

from __future__ import annotations

from claimbench.orchestrator import sweep


def _cache(root, sizes):
    for i, size in enumerate(sizes):
        d = root / f"index{i}"
        d.mkdir()
        (d / "size").write_text(size + "\n")


def test_the_last_level_is_the_largest_cache_sysfs_lists(tmp_path):
    _cache(tmp_path, ["32K", "32K", "1024K", "32768K"])
    assert sweep.last_level_bytes(str(tmp_path)) == 32 << 20


def test_unreadable_sizes_give_none_and_the_sweep_falls_back(tmp_path, monkeypatch):
    _cache(tmp_path, ["lots", ""])
    assert sweep.last_level_bytes(str(tmp_path)) is None
    assert sweep.last_level_bytes(str(tmp_path / "absent")) is None
    monkeypatch.setattr(sweep, "last_level_bytes", lambda: None)
    assert sweep.CacheSweep().nbytes == sweep.FALLBACK_BYTES


def test_a_sweep_is_twice_the_last_level_and_bounded(monkeypatch):
    monkeypatch.setattr(sweep, "last_level_bytes", lambda: 3 << 20)
    s = sweep.CacheSweep()
    assert s.nbytes == 6 << 20
    s()
    s()
    assert s.sweeps == 2
    assert sweep.CacheSweep(nbytes=10).nbytes == 1 << 20  # never below 1 MiB
    monkeypatch.setattr(sweep, "MAX_BYTES", 4 << 20)
    assert sweep.CacheSweep(nbytes=1 << 40).nbytes == 4 << 20


def test_the_next_claim_process_reads_the_same_buffer_and_every_page_of_it_is_there():
    """Made once per size (0.1 s of CPU a claim process before); a new size replaces the kept one."""
    a, b = sweep.CacheSweep(nbytes=2 << 20), sweep.CacheSweep(nbytes=2 << 20)
    assert a.buf is b.buf and int(a.buf.min()) == 1  # written: no page left to the shared zero page
    c = sweep.CacheSweep(nbytes=3 << 20)
    assert c.buf is not a.buf and c.buf.nbytes == 3 << 20 and list(sweep._KEPT) == [3 << 20]
