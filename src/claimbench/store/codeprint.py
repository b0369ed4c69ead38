"""A digest of the source of named modules, so a cache keyed by it dies with any change to the code
that filled it (the claim-check cache, the verified-record cache)."""
from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path
from typing import Iterable


def code_fingerprint(modules: Iterable[str]) -> str:
    """Hash each module's file by its dotted name; a module that cannot be found hashes as a marker, so
    a missing module still changes the digest instead of failing the command that only wanted a cache."""
    h = hashlib.sha256()
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        h.update(name.encode() + b"\0")
        h.update(Path(origin).read_bytes() if origin and Path(origin).is_file() else b"-")
    return h.hexdigest()[:16]
