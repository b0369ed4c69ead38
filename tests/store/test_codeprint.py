"""codeprint: a cache keyed by the source of named modules dies with any change to the code that filled it.

The modules are named by hand, so a module added to the code behind a cache, and not to its list, would
let the cache vouch for answers the new code no longer gives: a stale `check` pass after a forbidden op is
added to `spec/ops.py`, a stale clean audit after the median in `stats/samples.py` is fixed. These tests
hold each list to what its modules import (statically, function-level imports included), transitively.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest

from claimbench.gate import facts, gatecache
from claimbench.store import codeprint, recordcheck


def _module_file(name: str) -> Path | None:
    """The source of a claimbench module (not a package) by dotted name, or None."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # `from claimbench.x import function`: not a module
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py") or spec.origin.endswith("__init__.py"):
        return None
    return Path(spec.origin)


def imported_closure(roots: tuple[str, ...]) -> set[str]:
    """Every claimbench module the roots import, at any depth and at any level of the file."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        path = _module_file(name)
        if name in seen or path is None:
            continue
        seen.add(name)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                todo += [a.name for a in node.names if a.name.startswith("claimbench.")]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("claimbench"):
                todo += [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
    return seen


@pytest.mark.parametrize(("cache", "names", "roots"), [
    ("check results (gatecache)", gatecache._CODE,
     ("claimbench.gate.gatecache", "claimbench.gate.policy", "claimbench.gate.gateall")),
    ("source-file facts (facts)", facts._CODE, ("claimbench.gate.facts",)),
    ("audit and verified records (recordcheck)", recordcheck._CODE, ("claimbench.store.recordcheck",)),
])
def test_each_cache_is_keyed_by_every_module_its_code_imports(cache, names, roots):
    missing = sorted(imported_closure(tuple(names) + roots) - set(names))  # a listed module's imports count too
    assert not missing, f"the {cache} cache is not keyed by {missing}: add them to its _CODE"
    assert all(_module_file(n) is not None for n in names), "a listed module does not exist"


def test_the_closure_follows_function_level_imports(tmp_path):
    """The check above cannot pass vacuously: a module imported only inside a function counts."""
    assert "claimbench.stats.resample" in imported_closure(("claimbench.stats.precision",))  # lazy there
    assert "claimbench.spec.ops" in imported_closure(("claimbench.gate.rules",))


def test_the_fingerprint_changes_with_any_listed_module_and_marks_a_missing_one():
    a = codeprint.code_fingerprint(("claimbench.errors",))
    assert a != codeprint.code_fingerprint(("claimbench.errors", "claimbench.versions"))
    assert a != codeprint.code_fingerprint(("claimbench.errors", "claimbench.no_such_module"))
    assert len(a) == 16
