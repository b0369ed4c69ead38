"""What a claim's code is made of, read with ``ast`` and never imported.

Records hash these files, ``--changed-since`` diffs them, and the static rules read them. A project
module is any ``.py`` under the project root reached by imports from the claim's entry points,
plus the ``.cu``/``.cuh`` files those modules name in string literals.

It also draws the line between a claim's two sides: the task side (inputs, reference, baseline)
must be importable without running a line of the kernel's module, so that the judge's inputs are
never made where kernel code has run (``task_side_rule``).
"""

from __future__ import annotations

import ast
import os
import posixpath
import re
from collections import deque
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterator, Optional

from claimbench.gate.facts import facts
from claimbench.spec.claim import Claim

_RESOLVED: Optional[dict[str, Path]] = None  # set for one gate pass by `resolving`


@contextmanager
def resolving() -> Iterator[None]:
    """Remember `Path.resolve()` for one gate pass: a pass resolves the same root, kernels folder
    and shared kernel files for every claim, and each resolve walks every component with lstat
    (38% of `check`'s time at 1,000 claims). Outside a pass nothing is remembered, so a long
    process (the runner, a test session) always sees the files as they are."""
    global _RESOLVED
    outer = _RESOLVED
    _RESOLVED = {} if outer is None else outer
    try:
        yield
    finally:
        _RESOLVED = outer


def resolved(p: Path | str) -> Path:
    """``Path(p).resolve()``, remembered within a `resolving` pass."""
    cache = _RESOLVED
    if cache is None:
        return Path(p).resolve()
    key = os.fspath(p)
    if not os.path.isabs(key):
        key = os.path.join(os.getcwd(), key)
    got = cache.get(key)
    if got is None:
        got = cache[key] = Path(key).resolve()
    return got


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


def named_files(claim: Claim, root: Optional[Path] = None) -> frozenset[str]:
    """The project files the claim's callables live in, as a record's `source_sha256` keys them
    (root-relative POSIX paths; with ``root``, through symlinks as the runner resolves them, see
    `claim_sources`): every run loads each of them."""
    out = set()
    top = str(resolved(root)) if root is not None else ""
    for _, ref in impl_refs(claim):
        rel = posixpath.normpath(split_ref(ref)[0])
        if root is not None:  # strings, not Paths: publish asks this of every claim (2,000 in 0.5 s as Paths)
            real = str(resolved(os.path.join(root, rel)))
            if real.startswith(top.rstrip("/") + "/"):
                rel = real[len(top.rstrip("/")) + 1:]
            elif real == top:
                rel = "."
        out.add(rel)
    return frozenset(out)


def split_ref(ref: str) -> tuple[str, str]:
    path, _, func = ref.rpartition(":")
    return path, func


def walk(tree: ast.AST) -> list[ast.AST]:
    """``ast.walk`` (breadth first, the same order) into a list, less the ``Load``/``Store``/``Del``
    markers no rule reads (a third of all nodes), reading fields directly: about twice as fast."""
    out = [tree]
    i = 0
    while i < len(out):
        out.extend(children(out[i]))
        i += 1
    return out


def children(node: ast.AST) -> list[ast.AST]:
    """A node's child nodes in field order, without the expression-context markers."""
    out: list[ast.AST] = []
    for field in node._fields:
        v = getattr(node, field, None)
        if isinstance(v, ast.AST):
            if not isinstance(v, ast.expr_context):
                out.append(v)
        elif isinstance(v, list):
            out.extend(x for x in v if isinstance(x, ast.AST))
    return out


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
        names, strings = _import_facts(root, path)
    except (SyntaxError, OSError, UnicodeDecodeError):
        return set()
    out: set[Path] = set()
    for s in strings:
        cand = resolved(path.parent / s)
        if cand.is_file() and cand.is_relative_to(root):
            out.add(cand)
    me = path.resolve()
    tops: dict[str, bool] = {}  # most names are torch.*: one look at the project root rules out each package
    for name in names:
        top = name.split(".")[0]
        if top not in tops:
            tops[top] = (root / top).is_dir() or (root / f"{top}.py").is_file()
        f = module_file(root, name) if tops[top] else None
        if f is not None and f.resolve() != me:
            out.add(f.resolve())
    return out


def import_records(every: tuple[ast.AST, ...]) -> tuple:
    """Each import statement of a module, in walk order: ("import", line, 0, None, names) or
    ("from", line, level, module, names). Kept per file content (gate/facts.py); which module a
    relative one names depends on where the file sits, so that is worked out by `_imported_names`."""
    out: list[tuple] = []
    for node in every:
        if isinstance(node, ast.Import):
            out.append(("import", node.lineno, 0, None, tuple(a.name for a in node.names)))
        elif isinstance(node, ast.ImportFrom):
            out.append(("from", node.lineno, node.level, node.module, tuple(a.name for a in node.names)))
    return tuple(out)


def cu_strings(every: tuple[ast.AST, ...]) -> tuple[str, ...]:
    """String literals that name CUDA or C++ files (the data files a module loads)."""
    return tuple(node.value for node in every
                 if isinstance(node, ast.Constant) and isinstance(node.value, str) and _CU.search(node.value))


def _imported_names(root: Path, path: Path) -> list[tuple[int, list[str]]]:
    """(line, dotted names) of each import statement of ``path``, relative ones made absolute."""
    pkg = path.parent.relative_to(root).parts if path.is_relative_to(root) else ()
    out = []
    for kind, line, level, module, names in facts(path).imports:
        if kind == "import":
            out.append((line, list(names)))
            continue
        if level:
            parent = pkg[: len(pkg) - level + 1]
            mod = ".".join(parent + ((module,) if module else ()))
        else:
            mod = module or ""
        out.append((line, [mod] + [f"{mod}.{a}" for a in names]))
    return out


def _import_facts(root: Path, path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Dotted names a module imports and the data-file names in its strings, remembered per file
    version (every claim's closure asks them again); whether they exist is asked afresh each time."""
    return _import_facts_of(root, path, path.stat().st_mtime_ns)


@lru_cache(maxsize=2048)
def _import_facts_of(root: Path, path: Path, mtime_ns: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    names = [n for _, ns in _imported_names(root, path) for n in ns if n]
    return tuple(names), facts(path).strings


def closure(root: Path, files: set[Path]) -> set[Path]:
    """Every project file reachable by imports from ``files``."""
    root = resolved(root)
    seen: set[Path] = set()
    todo = [resolved(f) for f in files]
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
    entry = {resolved(root / split_ref(ref)[0]) for _, ref in impl_refs(claim)}
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


# The claim's task side and kernel side, by the keys that name their entry points.
TASK_KEYS = ("workload.inputs", "correctness.reference", "baseline.impl", "baseline.prepare")
KERNEL_KEYS = ("kernel.impl", "kernel.prepare")


def _import_lines(root: Path, path: Path) -> tuple[tuple[Path, int], ...]:
    """(project module, line) for each import statement of one module that names one, remembered
    per file version: `task_side_rule` asks it of the same files for every claim."""
    return _import_lines_of(root, path, path.stat().st_mtime_ns)


@lru_cache(maxsize=2048)
def _import_lines_of(root: Path, path: Path, mtime_ns: int) -> tuple[tuple[Path, int], ...]:
    me = path.resolve()
    out: list[tuple[Path, int]] = []
    for line, names in _imported_names(root, path):
        for name in names:
            f = module_file(root, name) if name else None
            if f is not None and f.resolve() != me:
                out.append((f.resolve(), line))
    return tuple(out)


def import_chain(root: Path, start: Path, targets: set[Path]) -> list[tuple[Path, int, Path]] | None:
    """The shortest chain of imports from ``start`` to any of ``targets``, as (importer, line,
    imported) steps; ``[]`` when ``start`` is itself a target, ``None`` when none is reached."""
    root, start = resolved(root), resolved(start)
    targets = {resolved(t) for t in targets}
    if start in targets:
        return []
    came: dict[Path, tuple[Path, int] | None] = {start: None}
    todo = deque([start])
    while todo:
        f = todo.popleft()
        try:
            edges = _import_lines(root, f)
        except (SyntaxError, OSError, UnicodeDecodeError):
            continue
        for g, line in edges:
            if g in came:
                continue
            came[g] = (f, line)
            if g in targets:
                chain = []
                while came[g] is not None:
                    prev, at = came[g]  # type: ignore[misc]
                    chain.append((prev, at, g))
                    g = prev
                return chain[::-1]
            todo.append(g)
    return None


def task_side_rule(root: Path, claim: Claim, add: Callable[[tuple[str, ...], str], None]) -> None:
    """Refuse a task-side entry point whose module has the kernel's module in its import closure.

    The inputs, the reference and the baseline run where no kernel code may have run; a module
    that imports the kernel's file (or is that file) would run it at import. ``add(keypath, msg)``
    receives one message per offending key."""
    root = resolved(root)
    refs = dict(impl_refs(claim))
    kernel_files = {resolved(root / split_ref(refs[k])[0]) for k in KERNEL_KEYS if k in refs}
    kernel_files = {f for f in kernel_files if f.is_file()}
    if not kernel_files:
        return

    def rel(p: Path) -> str:
        return str(p.relative_to(root)) if p.is_relative_to(root) else str(p)

    for key in TASK_KEYS:
        if key not in refs:
            continue
        path = resolved(root / split_ref(refs[key])[0])
        if not path.is_file():
            continue
        chain = import_chain(root, path, kernel_files)
        if chain is None:
            continue
        if not chain:
            what = f"`{rel(path)}` is the kernel's own module"
        else:
            steps = ", ".join(f"{rel(a)}:{line} imports {rel(b)}" for a, line, b in chain)
            what = f"`{rel(path)}` imports the kernel's module `{rel(chain[-1][2])}` ({steps})"
        add(tuple(key.split(".")), f"{what}, so the {_ROLE[key]} would be made where kernel code has "
            "run; split it: kernels/<mechanism>/task.py holds make_inputs, the reference and the "
            "baseline, kernels/<mechanism>/kernel.py holds the kernel and its prepare and may import "
            "task.py, never the reverse (README, 'Adding a claim')")


_ROLE = {"workload.inputs": "inputs", "correctness.reference": "reference",
         "baseline.impl": "baseline", "baseline.prepare": "baseline's operands"}
