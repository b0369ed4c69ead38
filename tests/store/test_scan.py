"""scan: only the runner's file names under records/<claim id>/ are records."""

from __future__ import annotations

import recordkit as rk

from claimbench.store import scan


def test_temp_files_and_other_names_are_not_records(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    folder = recs["gemm_h200"].parent
    (folder / ".tmp-abc.json").write_text("{")
    (folder / "notes.txt").write_text("x")
    assert len(scan.record_files(root / "results")) == len(recs)
