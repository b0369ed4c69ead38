"""Without a sandbox, what a claim changed in the project is found (utime cannot hide it) and undone."""

import os
import subprocess

from claimbench.orchestrator import filecensus


def _repo(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "results" / "records" / "c").mkdir(parents=True)
    rec = tmp_path / "results" / "records" / "c" / "r.json"
    rec.write_text('{"value": 1.0}')
    subprocess.run(["git", "-C", str(tmp_path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"],
                   check=True)
    return rec


def test_an_overwrite_hidden_with_utime_and_a_planted_record_are_found_and_undone(tmp_path):
    rec = _repo(tmp_path)
    before = filecensus.snapshot(tmp_path)
    st = rec.stat()
    rec.write_text('{"value": 32.0}')
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime: only ctime tells
    planted = tmp_path / "results" / "records" / "c" / "forged.json"
    planted.write_text("{}")
    os.utime(rec.parent, ns=(st.st_atime_ns, st.st_mtime_ns))
    changed, new, removed = filecensus.changes(before, filecensus.snapshot(tmp_path))
    assert str(rec) in changed and str(planted) in new and not removed
    left = filecensus.undo(tmp_path, changed, new, removed=removed, quarantine=tmp_path / "results" / ".quarantine")
    assert left == []
    assert rec.read_text() == '{"value": 1.0}' and not planted.exists()
    assert list((tmp_path / "results" / ".quarantine").rglob("forged.json"))


def test_an_uncommitted_edit_made_before_the_run_survives_and_the_changed_version_is_kept(tmp_path):
    """Issue 25: the undo puts a file back as it was when the run began, not as HEAD has it, and
    keeps the version the window left (a hand edit meanwhile cannot be told from the claim's)."""
    rec = _repo(tmp_path)
    rec.write_text('{"value": 2.0, "edited": "by hand, not committed"}')
    before = filecensus.snapshot(tmp_path)
    backup = filecensus.Backup(tmp_path)
    try:
        backup.refresh(before)
        rec.write_text('{"value": 99.0}')
        changed, new, removed = filecensus.changes(before, filecensus.snapshot(tmp_path))
        assert changed == [str(rec)]
        left = filecensus.undo(tmp_path, changed, new, removed=removed, quarantine=tmp_path / "results" / ".quarantine", backup=backup)
    finally:
        backup.close()
    assert left == []
    assert rec.read_text() == '{"value": 2.0, "edited": "by hand, not committed"}'
    kept = list((tmp_path / "results" / ".quarantine").rglob("r.json"))
    assert len(kept) == 1 and kept[0].read_text() == '{"value": 99.0}'


def test_backups_of_killed_runs_are_swept_and_a_live_runs_kept(tmp_path):
    """Issue 25: `kill -9` of a run left /tmp/claimbench-backup-* holding copies of untracked
    records for good; the next run removes the folders whose process is gone, and says so."""
    import os
    import subprocess
    import sys

    from claimbench.orchestrator import filecensus

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # a pid that was a run's and is gone
    backup = filecensus.Backup(tmp_path)
    assert backup.dir.name.startswith(f"{filecensus.BACKUP_PREFIX}{os.getpid()}-")
    (backup.dir / "0").write_text("mine, while I run")
    left = backup.dir.with_name(f"{filecensus.BACKUP_PREFIX}{dead.pid}-x1y2")
    left.mkdir()
    (left / "0").write_text("a copy of someone's untracked record")
    try:
        swept = filecensus.sweep_backups()
        assert left in swept and not left.exists()
        assert backup.dir.is_dir() and backup.dir not in swept
    finally:
        backup.close()
        import shutil
        shutil.rmtree(left, ignore_errors=True)
