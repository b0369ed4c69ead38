"""Resolve `kernels/file.py:function` to a callable, in the child process only.

The project root goes on ``sys.path`` so kernel files import each other as ``kernels.x``; a path
that leaves kernels/ is refused here too, not only by ``check``.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from pathlib import Path
from typing import Callable, Optional

from claimbench.gate.srcgraph import split_ref


class LoadError(Exception):
    """A claim ref that does not name a callable in a project file under kernels/; reported as the claim's error."""


def load(root: Path, ref: str) -> Callable:
    """The function ``ref`` names, its file imported as a kernels module; refuses a file outside kernels/ and
    a module that was imported from anywhere but the project."""
    file, func = split_ref(ref)
    path = (root / file).resolve()
    kernels = (root / "kernels").resolve()
    if not path.is_relative_to(kernels) or path.suffix != ".py":
        raise LoadError(f"{ref}: not a .py file inside kernels/")
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    if not any(isinstance(f, _ProjectFromSource) and f.kernels == kernels for f in sys.meta_path):
        sys.meta_path.insert(0, _ProjectFromSource(kernels))
    module_name = ".".join(path.relative_to(root.resolve()).with_suffix("").parts)
    module = importlib.import_module(module_name)
    if Path(getattr(module, "__file__", "")).resolve() != path:
        raise LoadError(f"{ref}: imported {module_name} from {module.__file__}, not from the project")
    fn = getattr(module, func, None)
    if not callable(fn):
        raise LoadError(f"{ref}: `{func}` is not a callable in {file}")
    return fn


# The fork server's own modules, as (module, __file__) by name, taken once before it forks any side
# (`remember_preloaded`). The server never imports claim code, so none of them is a kernel file, and
# resolving their ~2,000 paths again in every side cost about 0.1 s a side (40% of a CPU side's start,
# measured with py-spy on the cheat suite's honest claim). A module a side replaced, or whose
# `__file__` it changed, is not skipped.
_PRELOADED: dict[str, tuple[object, Optional[str]]] = {}


def remember_preloaded() -> None:
    """Called by the fork server once its imports are done, before its first fork."""
    _PRELOADED.clear()
    _PRELOADED.update({name: (mod, getattr(mod, "__file__", None)) for name, mod in list(sys.modules.items())})


def project_modules(root: Path) -> list[str]:
    """Kernel files that are loaded now: what the run really imported from kernels/ (a virtual
    environment inside the project is not the claim's code)."""
    root = root.resolve()
    kernels = root / "kernels"
    out = []
    for name, mod in list(sys.modules.items()):
        f = getattr(mod, "__file__", None)
        if not f:
            continue
        known = _PRELOADED.get(name)
        if known is not None and known[0] is mod and known[1] == f:
            continue
        path = Path(f).resolve()
        if path.is_relative_to(kernels):
            out.append(str(path.relative_to(root)))
    return sorted(set(out))


class _ProjectFromSource(importlib.abc.MetaPathFinder):
    """Imports every module under kernels/ from its source, never from a `__pycache__` file.

    Python would take `kernels/__pycache__/x.cpython-311.pyc` for x.py whenever its header names
    x.py's mtime and size, which a writer can copy. A kernel run with `--sandbox none` may write
    into the project, and the file census leaves `__pycache__` alone (the interpreter writes there
    itself), so a planted file would have given a later side, the task's included, code that
    `source_sha256` never hashed: a reference made to agree with a wrong kernel. From source, what
    runs is what the record hashes. A claim's own files are few and small: compiling them is
    milliseconds."""

    def __init__(self, kernels: Path) -> None:
        self.kernels = kernels

    def find_spec(self, name, path, target=None):  # noqa: ANN001 (the import system's protocol)
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or not spec.origin or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        if not Path(spec.origin).resolve().is_relative_to(self.kernels):
            return None
        spec.loader = _SourceOnly(spec.loader.name, spec.loader.path)
        spec.cached = None
        return spec


class _SourceOnly(importlib.machinery.SourceFileLoader):
    def get_code(self, fullname: str):  # noqa: ANN201 (a code object, as SourceFileLoader's)
        path = self.get_filename(fullname)
        return self.source_to_code(self.get_data(path), path)
