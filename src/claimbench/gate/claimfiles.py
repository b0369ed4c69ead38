"""Finding claim files: a walk no folder tree can crash or loop.

`rglob` recursed once per level (10,000 nested folders were a RecursionError for the whole of
`check`, `run` and `site`) and skipped a claim file that is a symlink loop without a word. This
walk is iterative, stops at MAX_FOLDER_DEPTH, follows no folder symlink, and turns every file
that looks like a claim but cannot be read into a located problem.
"""

from __future__ import annotations

import difflib
import errno
import os
from pathlib import Path
from typing import Iterable, Sequence

from claimbench.errors import UsageError
from claimbench.spec.problem import Problem

MAX_FOLDER_DEPTH = 32  # claims/ and a few levels of grouping; nothing needs thirty-two


def discover(paths: Iterable[str | Path], root: Path) -> list[Path]:
    """Claim files named by ``paths`` (files or folders); the default is ``claims/``."""
    return find_claims(paths, root)[0]


def named_claims(args: Sequence[str], root: Path) -> list[str]:
    """What the user named on the command line, as paths: each argument as given when it is there
    (a file, a folder, or a link that `find_claims` will report), else the claim file of that id, so
    `claimbench run cpu-softmax-fused-vs-naive` works as `show` does. Anything else is a usage error
    naming the nearest claim ids, before any file is touched."""
    out: list[str] = []
    ids: dict[str, Path] | None = None
    for raw in args:
        p = Path(raw)
        if p.exists() or p.is_symlink():
            out.append(raw)
            continue
        if ids is None:
            ids = {}
            for f in discover([], root):
                ids.setdefault(f.stem, f)
        if raw in ids:
            out.append(str(ids[raw]))
            continue
        near = difflib.get_close_matches(raw.removesuffix(".yaml").split("/")[-1], list(ids), n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(near)}?" if near else f"; claims are under {root / 'claims'}"
        raise UsageError(f"{raw}: no such file, folder or claim id{hint}")
    return out


def find_claims(paths: Iterable[str | Path], root: Path) -> tuple[list[Path], list[Problem]]:
    """Claim files named by ``paths`` (files or folders; default ``claims/``), and one problem for
    each thing that looks like a claim but cannot be read: a symlink loop or a dangling link, a
    folder tree deeper than MAX_FOLDER_DEPTH. Folders are walked without recursion and their
    symlinks are not followed, so no tree shape can crash or loop the walk."""
    found: list[Path] = []
    problems: list[Problem] = []
    for raw in paths or [root / "claims"]:
        p = Path(raw)
        if p.is_dir():
            files, probs = _walk(p)
            found += files
            problems += probs
        elif p.is_file():
            found.append(p)
        elif p.is_symlink():
            problems.append(_bad_link(p))
    return found, problems


def _walk(top: Path) -> tuple[list[Path], list[Problem]]:
    files, problems, deep = [], [], []
    stack = [(str(top), 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            problems.append(Problem(folder, 1, "file", f"cannot list the folder: {e.strerror or e}"))
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > MAX_FOLDER_DEPTH:
                    deep.append(entry.path)
                else:
                    stack.append((entry.path, depth + 1))
            elif entry.name.endswith((".yaml", ".yml")):
                if _is_file(entry):  # a symlink to a file is read; a loop or a dangling link is not a file
                    files.append(Path(entry.path))
                elif entry.is_symlink():
                    problems.append(_bad_link(Path(entry.path)))
    if deep:
        problems.append(Problem(deep[0], 1, "file", f"folders nested deeper than {MAX_FOLDER_DEPTH} levels under "
                                f"{top} ({len(deep)} such folder{'s' if len(deep) != 1 else ''}); claims are not "
                                "looked for there: keep claims/ shallow"))
    return sorted(files), problems


def _is_file(e: os.DirEntry) -> bool:
    try:
        return e.is_file()
    except OSError:  # a symlink loop
        return False


def _bad_link(p: Path) -> Problem:
    try:
        os.stat(p)
        why = "cannot be read"
    except OSError as e:
        why = "is a symlink loop" if e.errno == errno.ELOOP else "is a symlink to nothing"
    return Problem(str(p), 1, "file", f"{why}; a claim is a YAML file: fix or remove the link")
