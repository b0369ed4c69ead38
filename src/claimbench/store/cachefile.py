"""Cache files next to the evidence (`results/.cache`): one writer for the check, verified-record and
audit caches. A cache is an optimisation, so a read-only or full results folder only skips it, a
half-written file is never seen (write to a temp file, then rename), and a cache made by older code
(another fingerprint in its name) is removed once the new one is in place."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Union

from claimbench.spec.bounded import UnreadableFile, read_bytes
from claimbench.store.jsonio import dumps_json_line, loads_json

CACHE_LIMIT = 1 << 30  # the audit cache at 100,000 records is about 30 MB


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/claimbench`` (an absolute XDG_CACHE_HOME only), else ``~/.cache/claimbench``:
    what is cached per machine or per user rather than per results folder (the measured ceilings,
    the static rules' facts about a source file)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "claimbench"


def load_json_cache(path: Optional[Path]) -> dict:
    """The cache's dict, or {} when there is none or it cannot be read."""
    if path is None:
        return {}
    try:  # bounded, no links, regular files only: a FIFO planted as a cache must not hang a command
        data = loads_json(read_bytes(path, limit=CACHE_LIMIT, what="cache file"))
        return data if isinstance(data, dict) else {}
    except (UnreadableFile, OSError, ValueError):
        return {}


def save_cache(path: Path, content: Union[dict, Iterable[str], Iterable[bytes]], stale: str) -> None:
    """Write a dict as one JSON line, or lines (text or UTF-8 bytes) as they are; then drop the
    files matching `stale` (a glob in the same folder) other than this one."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=path.parent)
        with os.fdopen(fd, "wb") as f:
            if isinstance(content, dict):
                f.write(dumps_json_line(content).encode("utf-8"))
            else:
                f.writelines(line.encode("utf-8") if isinstance(line, str) else line for line in content)
        os.replace(tmp, path)
        tmp = None
        for old in path.parent.glob(stale):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)
