"""The one reader for files that come from outside: records, artifacts, the list, claims' sources.

A file a user or a fleet hands over can be anything: a symlink to `/dev/zero` (read for ever), a
FIFO (blocks for ever), a sparse file of 2 GiB (memory), a link out of the folder it is read from,
or text that is not UTF-8. Reading through one descriptor opened without following links, a type
check on that descriptor, a size limit checked before reading (and again while reading, for a
file that grows), and a located message for bad UTF-8 turns each of those into one line a user
can act on, never a hang or a traceback.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from claimbench.errors import UserError

DEFAULT_LIMIT = 64 << 20


class UnreadableFile(UserError):
    """The file could not be read as what it should be; the message names it and why."""


def read_bytes(path: str | Path, *, limit: int = DEFAULT_LIMIT, what: str = "file") -> bytes:
    """The bytes of a regular file (never through a symlink), refused past ``limit`` bytes."""
    return read_with_stat(path, limit=limit, what=what)[0]


def read_with_stat(path: str | Path, *, limit: int = DEFAULT_LIMIT, what: str = "file") -> tuple[bytes, os.stat_result]:
    """``read_bytes`` and the stat of the very descriptor read (a cache keyed on it names these bytes)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):  # O_NOFOLLOW on a symlink (EMLINK on FreeBSD)
            raise UnreadableFile(f"{path}: a symlink; a {what} is read only as a regular file, never through a link") from None
        raise UnreadableFile(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"{path}: not a regular file (a FIFO, device or folder); a {what} must be one")
        if st.st_size > limit:
            raise UnreadableFile(f"{path}: {st.st_size} bytes, over the {_size(limit)} limit for a {what}; refused unread")
        chunks, total = [], 0
        while chunk := os.read(fd, max(1, min(1 << 20, limit + 1 - total))):
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise UnreadableFile(f"{path}: grew past the {_size(limit)} limit for a {what} while read")
        return b"".join(chunks), st
    except OSError as e:
        raise UnreadableFile(f"{path}: cannot read the {what} ({e.strerror or e})") from None
    finally:
        os.close(fd)


def read_text(path: str | Path, *, limit: int = DEFAULT_LIMIT, what: str = "file") -> str:
    """``read_bytes`` decoded as UTF-8; a bad byte is reported with its line and column."""
    raw = read_bytes(path, limit=limit, what=what)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        col = e.start - (raw.rfind(b"\n", 0, e.start) + 1) + 1
        raise UnreadableFile(f"{path}:{line}: column {col}: byte 0x{raw[e.start]:02x} is not UTF-8; "
                             f"save the {what} as UTF-8") from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"
