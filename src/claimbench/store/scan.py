"""Which files under `results/records/` are records, and which are strays.

Only what the runner writes is read: `records/<claim id>/<runner's file name>`, regular files,
no symlinks followed. Everything else there is a stray that audit reports with why, and a temp
file of a write in progress (or killed) is neither. Paths are strings, not `Path`s: this runs over
100,000 files on every publish.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from claimbench.store.record import RECORD_NAME, TEMP_NAME
from claimbench.store.recordwrite import NOT_A_RECORD_NAME

CLAIM_ID = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
_RECORD_MATCH = RECORD_NAME.match


def scan_tree(results: Path) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(records, strays) under results/records: records as (path relative to results, full
    path), sorted; strays as (path relative to results, why it is not read). Strings, not
    Paths, because this runs over 100,000 files on every publish. Symlinks are never followed;
    temp files of a write in progress (or killed) are neither records nor strays."""
    base = os.path.join(results, "records")
    if not os.path.isdir(base):
        return [], []
    out, strays = [], []
    for d in sorted(os.scandir(base), key=lambda e: e.name):
        rel_d = f"records/{d.name}"
        if d.is_symlink():
            strays.append((rel_d, "a symlink; claimbench does not follow links out of results/"))
        elif not d.is_dir(follow_symlinks=False):
            if not TEMP_NAME.match(d.name):
                strays.append((rel_d, "a file outside any claim folder; records live in records/<claim id>/"))
        elif not CLAIM_ID.match(d.name):
            strays.append((rel_d, "not a claim id (lowercase letters, digits, '.', '_', '-'); its files are not read"))
        else:
            names = []
            for f in os.scandir(d.path):
                name = f.name
                if _RECORD_MATCH(name) and f.is_file(follow_symlinks=False):
                    names.append(name)
                elif f.is_symlink():
                    strays.append((f"{rel_d}/{name}", "a symlink; claimbench does not follow links out of results/"))
                elif not TEMP_NAME.match(name):
                    strays.append((f"{rel_d}/{name}", NOT_A_RECORD_NAME))
            names.sort()
            rel_p, full_p = rel_d + "/", d.path + "/"
            out += [(rel_p + n, full_p + n) for n in names]
    return out, sorted(strays)


def scan_records(results: Path) -> list[tuple[str, str]]:
    """(path relative to results, full path) of every record file, sorted (see `scan_tree`)."""
    return scan_tree(results)[0]


def record_files(results: Path) -> list[Path]:
    """Every record file: results/records/<claim-id>/<runner's name>.json, sorted."""
    return [Path(full) for _, full in scan_records(Path(results))]
