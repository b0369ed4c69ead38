"""How a claim's `hardware.model` patterns match a device name: one rule for the runner, which
decides whether this machine may measure the claim, and the record check, which refuses a record
whose hardware its own claim would not have accepted (a record saying it ran on an H200 for a
`device: cpu` claim reached the list, issue 25)."""

from __future__ import annotations

import fnmatch
from typing import Iterable


def glob_any(patterns: Iterable[str], name: str) -> bool:
    """``name`` matches one of the shell-style ``patterns``, ignoring case."""
    return any(fnmatch.fnmatchcase(name.lower(), p.lower()) for p in patterns)
