"""What a claim's code is made of, read with ``ast`` and never imported.

Records hash these files, ``--changed-since`` diffs them, and the static rules read them. A project
module is any ``.py`` under the project root reached by imports from the claim's entry points,
plus the ``.cu``/``.cuh`` files those modules name in string literals.
"""

from __future__ import annotations

import ast
import re
from functools import lru_cache
from pathlib import Path

from .claim import Claim

_CU = re.compile(r"[\w./-]+\.(?:cu|cuh|h|cpp)$")


def impl_refs(claim: Claim) -> list[tuple[str, str]]:
    """(key, `file.py:function`) for every callable the claim names."""
    refs = [("workload.inputs", claim.workload.inputs), ("kernel.impl", claim.kernel.impl),
            ("baseline.impl", claim.baseline.impl)]
    if claim.kernel.prepare:
        refs.append(("kernel.prepare", claim.kernel.prepare))
    if claim.baseline.prepare:
        refs.append(("baseline.prepare", claim.baseline.prepare))
    if claim.correctness.reference != "baseline-float64":
        refs.append(("correctness.reference", claim.correctness.reference))
    return refs


def split_ref(ref: str) -> tuple[str, str]:
    path, _, func = ref.rpartition(":")
    return path, func


@lru_cache(maxsize=512)
def parse_file(path: Path, mtime_ns: int = 0) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def parse(path: Path) -> ast.Module:
    return parse_file(path, path.stat().st_mtime_ns)


def module_file(root: Path, dotted: str) -> Path | None:
    """The project file a dotted import names, if it is one of ours."""
    base = root.joinpath(*dotted.split("."))
    for cand in (base.with_suffix(".py"), base / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def imported_project_files(root: Path, path: Path) -> set[Path]:
    """Project modules and data files one module imports or names."""
    try:
        names, strings = _import_facts(root, path, path.stat().st_mtime_ns)
    except (SyntaxError, OSError, UnicodeDecodeError):
        return set()
    out: set[Path] = set()
    for s in strings:
        cand = (path.parent / s).resolve()
        if cand.is_file() and cand.is_relative_to(root):
            out.add(cand)
    me = path.resolve()
    for name in names:
        f = module_file(root, name)
        if f is not None and f.resolve() != me:
            out.add(f.resolve())
    return out


@lru_cache(maxsize=2048)
def _import_facts(root: Path, path: Path, mtime_ns: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Dotted names a module imports and the data-file names in its strings, per file version;
    whether they exist is asked afresh each time."""
    tree = parse(path)
    pkg = path.parent.relative_to(root).parts if path.is_relative_to(root) else ()
    names: list[str] = []
    strings: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parent = pkg[: len(pkg) - node.level + 1]
                mod = ".".join(parent + ((node.module,) if node.module else ()))
            else:
                mod = node.module or ""
            names.extend([mod] + [f"{mod}.{a.name}" for a in node.names])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _CU.search(node.value):
            strings.append(node.value)
    return tuple(n for n in names if n), tuple(strings)


def closure(root: Path, files: set[Path]) -> set[Path]:
    """Every project file reachable by imports from ``files``."""
    root = root.resolve()
    seen: set[Path] = set()
    todo = [f.resolve() for f in files]
    while todo:
        f = todo.pop()
        if f in seen or not f.is_file():
            continue
        seen.add(f)
        if f.suffix == ".py":
            todo.extend(imported_project_files(root, f) - seen)
    return seen


def claim_sources(root: Path, claim: Claim) -> set[Path]:
    """The files a claim's run depends on (the claim file itself excluded)."""
    entry = {(root / split_ref(ref)[0]).resolve() for _, ref in impl_refs(claim)}
    return closure(root, {p for p in entry if p.is_file()})


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module defines at top level: functions, classes, assignments, imports."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names
