"""Cache files next to the evidence (`results/.cache`): one writer for the check, verified-record and
audit caches. A cache is an optimisation, so a read-only or full results folder only skips it, a
half-written file is never seen (write to a temp file, then rename), and a cache made by older code
(another fingerprint in its name) is removed once the new one is in place."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Iterable, Optional, Union

from claimbench.store.jsonio import dumps_json_line, loads_json


def load_json_cache(path: Optional[Path]) -> dict:
    """The cache's dict, or {} when there is none or it cannot be read."""
    if path is None:
        return {}
    try:
        data = loads_json(path.read_bytes())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
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
