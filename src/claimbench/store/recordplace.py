"""Place a record's bytes at `results/records/<claim>/<name>` without following a link.

The store is committed, so what sits in it came from whoever wrote the last commit: a claim
folder that is a symlink would carry an ingested record out of `results/` (and a later index
entry would name a file outside it), and a record name that is a symlink to `/dev/zero` would be
read for ever when ingest compares it with the record it brings. So each folder below `results/`
is opened without following links (refused when it is a link or not a folder), an existing record
is read only through the bounded reader (`record.read_record_bytes`), and the new file is created
beside its name, world-readable like the runner's records, then linked to its name, so a record
that appeared meanwhile is never replaced. Every refusal is a `PlaceRefused`: one line naming the
path and what to do.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import Optional

from claimbench.store.record import RecordError, read_record_bytes

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class PlaceRefused(Exception):
    """The destination is not a place a record may be written; the message says which path and why."""


def existing_bytes(results: Path, claim_id: str, name: str) -> Optional[bytes]:
    """The bytes of the record already at that name, or None when there is none; raises
    PlaceRefused for a linked folder or file, or one that cannot be read as a record."""
    fd = _folders(Path(results), claim_id, create=False)
    if fd is None:
        return None
    try:
        return _existing(fd, Path(results) / "records" / claim_id / name)
    finally:
        os.close(fd)


def place(results: Path, claim_id: str, name: str, *, raw: bytes) -> Optional[bytes]:
    """Write ``raw`` at `records/<claim_id>/<name>` under ``results``, never replacing a file.
    Returns None when written, or the bytes of a record already there (written meanwhile or
    before) for the caller to compare; raises PlaceRefused."""
    results = Path(results)
    dest = results / "records" / claim_id / name
    fd = _folders(results, claim_id, create=True)
    assert fd is not None
    tmp = f".tmp-{secrets.token_hex(6)}.json"  # recordwrite.TEMP_NAME: skipped by readers, swept when stale
    try:
        if (there := _existing(fd, dest)) is not None:
            return there
        try:
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                          0o644, dir_fd=fd)
            try:
                os.fchmod(out, 0o644)  # world-readable whatever the umask, as the runner writes records
                view = memoryview(raw)
                while view:
                    view = view[os.write(out, view):]
                os.fsync(out)
            finally:
                os.close(out)
            os.link(tmp, name, src_dir_fd=fd, dst_dir_fd=fd, follow_symlinks=False)
        except FileExistsError:
            there = _existing(fd, dest)  # another writer's record under that name: compared, never replaced
            if there is None:
                raise PlaceRefused(f"{dest}: appeared and vanished while ingest wrote it; run ingest again") from None
            return there
        except OSError as e:
            raise PlaceRefused(f"{dest}: cannot write the record ({e.strerror or e}); "
                               "make the folder writable and run ingest again") from None
        return None
    finally:
        try:
            os.unlink(tmp, dir_fd=fd)
        except OSError:
            pass
        os.close(fd)


def _existing(fd: int, dest: Path) -> Optional[bytes]:
    try:
        st = os.lstat(dest.name, dir_fd=fd)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PlaceRefused(f"{dest}: cannot look at the existing file ({e.strerror or e})") from None
    if stat.S_ISLNK(st.st_mode):
        raise PlaceRefused(f"{dest}: a symbolic link where a record belongs; ingest never reads or writes through "
                           "a link: remove it (git rm) and run ingest again")
    try:
        return read_record_bytes(dest)[0]
    except RecordError as e:
        raise PlaceRefused(f"{e}; remove or restore that file and run ingest again") from None


def _folders(results: Path, claim_id: str, *, create: bool) -> Optional[int]:
    """A descriptor of `records/<claim_id>` under ``results``, each folder opened without following
    a link (made when ``create``); None when one is missing and not ``create``."""
    try:
        if create:
            results.mkdir(parents=True, exist_ok=True)
        fd = os.open(results, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as e:
        raise PlaceRefused(f"{results}: cannot open the results folder ({e.strerror or e})") from None
    shown = results
    for part in ("records", claim_id):
        shown = shown / part
        try:
            fd = _child(fd, part, shown, create=create)
        except BaseException:
            os.close(fd)
            raise
        if fd < 0:
            return None
    return fd


def _child(parent: int, name: str, shown: Path, *, create: bool) -> int:
    """Open folder ``name`` in ``parent`` (closed here) without following a link; -1 when it is
    missing and not ``create``."""
    for _ in range(2):
        try:
            fd = os.open(name, _DIR, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                os.close(parent)
                return -1
            try:
                os.mkdir(name, 0o755, dir_fd=parent)
            except FileExistsError:
                pass
            except OSError as e:
                raise PlaceRefused(f"{shown}: cannot make the folder ({e.strerror or e})") from None
            continue
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                raise PlaceRefused(_not_a_folder(parent, name, shown)) from None
            raise PlaceRefused(f"{shown}: cannot open the folder ({e.strerror or e})") from None
        os.close(parent)
        return fd
    raise PlaceRefused(f"{shown}: vanished while ingest made it; run ingest again")


def _not_a_folder(parent: int, name: str, shown: Path) -> str:
    try:
        link = stat.S_ISLNK(os.lstat(name, dir_fd=parent).st_mode)
    except OSError:
        link = False
    if link:
        return (f"{shown}: a symbolic link where a folder of records belongs; ingest never writes through a link "
                "(records would land outside results/): replace it with a real folder and run ingest again")
    return f"{shown}: not a folder; records go in a folder of that name: move the file away and run ingest again"
