"""orchestrator/memory.py `misplaced`: where a reported output lies, read from /proc/<pid>/maps by
bisection, says the same as reading every mapping."""

from __future__ import annotations

import os

import numpy as np

from claimbench.orchestrator import memory


def _by_full_scan(pid: int, ptr: int, nbytes: int) -> str:
    """The whole listing, sorted: what `misplaced` read before it bisected."""
    lo, hi, covered = ptr, ptr + nbytes, ptr
    for start, end, perms, path in sorted(memory.mappings(pid)):
        if end <= lo or start >= hi:
            continue
        if path.startswith(f"/memfd:{memory.OPERAND_MEMFD}"):
            return "operand"
        if start > covered or "r" not in perms:
            break
        covered = max(covered, end)
    return "" if covered >= hi else "unmapped"


def _kind(why: str) -> str:
    return "" if not why else "operand" if "input pages" in why else "unmapped"


def test_an_array_of_ours_is_in_place_and_operand_pages_and_holes_are_not():
    pid = os.getpid()
    a = np.ones(100_000)
    assert memory.misplaced(pid, a.ctypes.data, a.nbytes) == ""
    buf = memory.OwnedBuffer(1 << 16)
    try:
        assert "input pages" in memory.misplaced(pid, buf.view.ctypes.data + 8, 64)
    finally:
        buf.close()
    assert "not mapped readable" in memory.misplaced(pid, 4096, 64)  # the zero page is never mapped


def test_bisection_agrees_with_the_full_listing_at_every_mapping_edge():
    pid = os.getpid()
    buf = memory.OwnedBuffer(1 << 16)
    try:
        spans = []
        for start, end, _, _ in memory.mappings(pid)[::3]:
            spans += [(start, end - start), (start + 1, end - start), (end - 8, 16), (start, 1), (start - 1, 2)]
        for ptr, n in spans:
            assert _kind(memory.misplaced(pid, ptr, n)) == _by_full_scan(pid, ptr, n), (hex(ptr), n)
    finally:
        buf.close()
