"""Where the project is: the folder that holds claims/ and kernels/, and its LIST.md."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from claimbench.errors import UsageError, UserError
from claimbench.spec.bounded import read_text


def find_root(explicit: Optional[str], paths: Iterable[str] = ()) -> Path:
    """The explicit --root, else the nearest ancestor of the first path (or the cwd) holding claims/ or kernels/."""
    if explicit:
        root = Path(explicit).resolve()
        if not root.is_dir():
            raise UsageError(f"--root {explicit}: not a folder")
        return root
    starts = [Path(p).resolve() for p in paths] + [Path.cwd().resolve()]
    for start in starts:
        for cand in [start] + list(start.parents):
            if (cand / "claims").is_dir() or (cand / "kernels").is_dir():
                return cand
    return Path.cwd().resolve()


def load_listing(root: Path, list_path: Optional[str] = None):
    """The parsed list claims attach to; None when the project has none."""
    from claimbench.spec.listing import ListError, parse_list

    path = Path(list_path) if list_path else root / "LIST.md"
    if not path.is_file():
        if list_path:
            raise UsageError(f"{list_path}: no such list file")
        return None
    try:
        return parse_list(read_text(path, what="list"), str(path.relative_to(root) if path.is_relative_to(root) else path))
    except ListError as e:
        raise UserError(f"{path}: {e}") from None
