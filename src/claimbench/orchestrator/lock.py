"""One claim of a project measured at a time, whoever starts it (two `claimbench run`, pytest-xdist
workers, `reproduce`).

Two claims measured at once share the cores, so each would see the other as load; and without a
sandbox the file census that undoes a claim's writes would take the other run's new record for a
planted one. A lock per project orders them instead; each still writes its own record and log.
The lock is taken on the project's folder itself (`flock` on a descriptor of the directory): no
file is made, a read-only project can still be locked, and two paths to one folder are one lock.
Before, a lock file per project path stayed in the system's temporary folder for good (2,272 on
this project's VM, about 150 more per test run). Where the file system refuses a lock on a folder,
the lock is a file in the temporary folder named after the project's path, as before. The
commands that write into the project (`ingest`, `publish`, `new`, `site`) take the same lock, so
their writes never fall inside a claim's window, where the census would take them for the
claim's and undo them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def lock_path(root: Path) -> Path:
    """The fallback lock file, where the project's folder cannot be locked: in the system's
    temporary folder, named for this user and the project's resolved path."""
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"claimbench-{os.getuid()}-{key}.lock"


def _take(root: Path, how: int) -> int:
    """A descriptor holding the project lock (``how``: flock's operation, LOCK_NB included or not).
    Raises BlockingIOError where LOCK_NB was asked and another process holds it."""
    import fcntl

    try:
        fd = os.open(Path(root).resolve(), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        fd = -1
    if fd >= 0:
        try:
            fcntl.flock(fd, how)
            return fd
        except BlockingIOError:
            os.close(fd)
            raise
        except OSError:  # a file system without locks on folders: the lock file below
            os.close(fd)
    fd = os.open(lock_path(root), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, how)
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextmanager
def one_claim_at_a_time(root: Path, shared: bool = False) -> Iterator[None]:
    """The project lock for one claim's window. ``shared``: a claim that is only checked, never
    timed, whose records land where the file census does not look, holds it shared: such claims
    run side by side (nothing of theirs is load to the other, nor a planted file), while a timed
    claim and every command that writes into the project still wait for all of them."""
    import fcntl

    fd = _take(root, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


@contextmanager
def project_writes(root: Path, say=None) -> Iterator[None]:
    """The project lock for a command that writes into the project; says once, in one line, that it
    waits when a claim holds it."""
    import fcntl

    try:
        fd = _take(root, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        if say is not None:
            say("waiting for the claim being measured in this project to finish (a `claimbench run` holds the "
                "project lock; writes made during its window would be taken for the claim's)")
        fd = _take(root, fcntl.LOCK_EX)
    try:
        yield
    finally:
        os.close(fd)
