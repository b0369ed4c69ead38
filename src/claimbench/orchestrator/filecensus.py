"""The files a claim's processes must not change, checked from outside after they are gone.

Without bubblewrap the claim's code runs with the user's rights and can write anywhere the user
can. The run cannot prevent that, but it can notice and undo it: before the claim, the inode, size
and times (ctime cannot be set back with `os.utime`) of every file under the project are noted;
after the claim's processes are gone, a changed file is put back as it was when the run began
(from the run's own copy when git does not track it or it held uncommitted edits, from git when it
matched HEAD), the changed version is kept in results/.quarantine so that nothing is lost (a hand
edit made during the window cannot be told from the claim's), a planted file is moved there too,
and the claim ends as `error` naming them. The commands that write into the project take the
project lock (orchestrator/lock.py), so their writes never fall inside a claim's window.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from claimbench.orchestrator import census

SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", ".hypothesis", ".pytest_cache", "node_modules", ".cache",
             ".quarantine", ".whl", ".gl"}
MAX_FILES = 200_000


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
    """(inode, size, mtime_ns, ctime_ns, mode) of every path under ``root``, folders included, by absolute
    path; SKIP_DIRS and ``skip`` are left out, and the walk stops at MAX_FILES entries."""
    skip_abs = {str(p.resolve()) for p in skip}
    out: dict[str, tuple] = {}
    stack = [str(root.resolve())]
    while stack and len(out) < MAX_FILES:
        d = stack.pop()
        try:
            with os.scandir(d) as it:
                for e in it:
                    if e.name in SKIP_DIRS or e.path in skip_abs:
                        continue
                    try:
                        st = e.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if e.is_dir(follow_symlinks=False):
                        stack.append(e.path)
                    out[e.path] = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
        except OSError:
            continue
    return out


def changes(before: dict[str, tuple], after: dict[str, tuple]) -> tuple[list[str], list[str], list[str]]:
    """(changed, planted, removed) paths; a folder counts only when it appeared or vanished."""
    changed = [p for p in before.keys() & after.keys()
               if before[p] != after[p] and not _is_dir(after[p])]
    planted = [p for p in after.keys() - before.keys()]
    removed = [p for p in before.keys() - after.keys()]
    return sorted(changed), sorted(planted), sorted(removed)


def _is_dir(st: tuple) -> bool:
    import stat
    return stat.S_ISDIR(st[4])


BACKUP_MAX_BYTES = 256 << 20
BACKUP_PREFIX = "claimbench-backup-"
SCRATCH_PREFIX = "claimbench-sides-"  # a landlock run's scratch folder (orchestrator/processes.py)


def sweep_backups() -> list[Path]:
    """Remove the backup and scratch folders of runs that were killed (`kill -9` skips every
    cleanup): each folder is named after the process that made it, and one whose process is gone
    holds copies of untracked files nobody will restore, or a dead side's caches. Only this user's folders; returns what was removed, so the
    run can say so (issue 25: they were left in the temporary folder for good)."""
    import tempfile

    out = []
    base = Path(tempfile.gettempdir())
    try:
        entries = list(os.scandir(base))
    except OSError:
        return []
    for e in entries:
        prefix = next((p for p in (BACKUP_PREFIX, SCRATCH_PREFIX) if e.name.startswith(p)), None)
        if prefix is None or not e.is_dir(follow_symlinks=False):
            continue
        pid = e.name[len(prefix):].split("-", 1)[0]
        try:
            if not pid.isdigit() or e.stat(follow_symlinks=False).st_uid != os.getuid() or census.alive(int(pid)):
                continue
        except OSError:
            continue
        shutil.rmtree(e.path, ignore_errors=True)
        if not os.path.exists(e.path):
            out.append(Path(e.path))
    return out


class Backup:
    """Copies of the files git does not track or that hold uncommitted edits, taken once and kept up
    to date, so a claim that rewrites one can be undone to what it was, never to HEAD; past
    BACKUP_MAX_BYTES a changed file is quarantined instead."""

    def __init__(self, root: Path) -> None:
        import tempfile

        self.root = root
        self.dir = Path(tempfile.mkdtemp(prefix=f"{BACKUP_PREFIX}{os.getpid()}-"))  # swept once this pid is gone
        self.kept: dict[str, tuple] = {}
        self.where: dict[str, Path] = {}
        self.bytes = 0

    def refresh(self, snap: dict[str, tuple]) -> None:
        """Copy what is new or changed since the last refresh (the runner's own new records)."""
        import stat

        tracked = _tracked(self.root) - _dirty(self.root)
        for path, st in snap.items():
            if not stat.S_ISREG(st[4]) or self.kept.get(path) == st:
                continue
            if os.path.relpath(path, self.root) in tracked or self.bytes + st[1] > BACKUP_MAX_BYTES:
                continue
            dest = self.dir / str(len(self.kept))
            try:
                shutil.copyfile(path, dest)
            except OSError:
                continue
            self.kept[path] = st
            self.where[path] = dest
            self.bytes += st[1]

    def restore(self, path: str) -> bool:
        """Put the run's copy back at ``path`` (through a temporary file and a rename); False when there is
        no copy or it could not be written, so `undo` tries git or quarantines it."""
        src = self.where.get(path)
        if src is None:
            return False
        try:
            tmp = path + ".claimbench-restore"
            shutil.copyfile(src, tmp)
            os.replace(tmp, path)
            return True
        except OSError:
            return False

    def close(self) -> None:
        """Remove the copies, once the run is over and nothing will be restored from them."""
        shutil.rmtree(self.dir, ignore_errors=True)


def undo(root: Path, changed: list[str], planted: list[str], *, removed: list[str], quarantine: Path,
         backup: "Backup | None" = None) -> list[str]:
    """Put back what the run's copy or git knows, as it was when the run began, keeping each changed
    version in the quarantine; quarantine the rest; returns what could not be undone."""
    left = []
    tracked = _tracked(root)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for p in changed + removed:
        rel = os.path.relpath(p, root)
        if p in changed:
            _keep(p, quarantine / stamp / rel)
        if backup is not None and backup.restore(p):
            continue
        if rel in tracked and (backup is None or p not in backup.where) and _restore(root, rel):
            continue
        left.append(rel)
        if os.path.exists(p):  # a rewritten copy must not stay where ingest or publish would read it
            planted.append(p)
    for p in sorted(planted, key=len, reverse=True):
        rel = os.path.relpath(p, root)
        dest = quarantine / stamp / rel
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(p, dest)
        except OSError:
            left.append(rel)
    return left


def _keep(path: str, dest: Path) -> None:
    """A copy of the changed version, so that a hand edit made during the window is not lost."""
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
    except OSError:
        pass


def _dirty(root: Path) -> set[str]:
    """Tracked files whose content differs from HEAD (staged or not): git cannot give them back."""
    try:
        r = subprocess.run(["git", "-C", str(root), "diff", "HEAD", "--name-only", "-z"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(r.stdout.decode("utf-8", "replace").split("\0")) - {""} if r.returncode == 0 else set()


def _tracked(root: Path) -> set[str]:
    try:
        r = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return set(r.stdout.decode("utf-8", "replace").split("\0")) if r.returncode == 0 else set()


def _restore(root: Path, rel: str) -> bool:
    try:
        r = subprocess.run(["git", "-C", str(root), "checkout", "--", rel], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0
