"""One claim of a project measured at a time, whoever starts it (two `claimbench run`, pytest-xdist
workers, `reproduce`).

Two claims measured at once share the cores, so each would see the other as load; and without a
sandbox the file census that undoes a claim's writes would take the other run's new record for a
planted one. A lock per project (a file in the system's temporary folder, named after the project's
path, so a read-only project can still be locked) orders them instead; each still writes its own
record and log. The commands that write into the project (`ingest`, `publish`, `new`, `site`)
take the same lock, so their writes never fall inside a claim's window, where the census would
take them for the claim's and undo them.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator


def lock_path(root: Path) -> Path:
    """The project's lock file: in the system's temporary folder, named for this user and the project's
    resolved path."""
    key = hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"claimbench-{os.getuid()}-{key}.lock"


@contextmanager
def one_claim_at_a_time(root: Path, shared: bool = False) -> Iterator[None]:
    """The project lock for one claim's window. ``shared``: a claim that is only checked, never
    timed, whose records land where the file census does not look, holds it shared: such claims
    run side by side (nothing of theirs is load to the other, nor a planted file), while a timed
    claim and every command that writes into the project still wait for all of them."""
    import fcntl

    with open(lock_path(root), "a") as f:
        fcntl.flock(f, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def project_writes(root: Path, say=None) -> Iterator[None]:
    """The project lock for a command that writes into the project; says once, in one line, that it
    waits when a claim holds it."""
    import fcntl

    with open(lock_path(root), "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if say is not None:
                say("waiting for the claim being measured in this project to finish (a `claimbench run` holds the "
                    "project lock; writes made during its window would be taken for the claim's)")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
