"""The files a claim's processes must not change, checked from outside after they are gone.

Without bubblewrap the claim's code runs with the user's rights and can write anywhere the user
can. The run cannot prevent that, but it can notice and undo it: before the claim, the inode, size
and times (ctime cannot be set back with `os.utime`) of every file under the project are noted;
after the claim's processes are gone, a changed tracked file is restored from git, a planted file
is moved to results/.quarantine, and the claim ends as `error` naming them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

SKIP_DIRS = {".git", ".venv", "venv", "__pycache__", ".hypothesis", ".pytest_cache", "node_modules", ".cache",
             ".quarantine", ".whl", ".gl"}
MAX_FILES = 200_000


def snapshot(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple]:
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


def undo(root: Path, changed: list[str], planted: list[str], removed: list[str], quarantine: Path) -> list[str]:
    """Restore what git knows, quarantine what was planted; returns what could not be undone."""
    left = []
    tracked = _tracked(root)
    for p in changed + removed:
        rel = os.path.relpath(p, root)
        if rel in tracked and _restore(root, rel):
            continue
        left.append(rel)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    for p in sorted(planted, key=len, reverse=True):
        rel = os.path.relpath(p, root)
        dest = quarantine / stamp / rel
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(p, dest)
        except OSError:
            left.append(rel)
    return left


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
