"""The package's shape, checked: stages import only downward (import-linter, with a planted violation
that must break it), the light layers import no heavy package at module level, and claim code is
imported only inside the side processes."""
from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "src" / "claimbench"
ROOT = PKG.parents[1]
HEAVY = {"torch", "triton", "cupy", "pandas", "matplotlib"}
# Everything but the processes that run claims (side), drive them (run) and measure the machine
# (machine.ceilings_measure, machine.detect), which import torch lazily or by design.
LIGHT = ("spec", "gate", "stats", "store", "verify", "report", "ci", "commands", "errors.py", "extras.py", "cli.py",
         "clidoc.py", "scaffold.py", "reproduce.py", "runner.py", "__main__.py", "__init__.py")


def _module_level_imports(path: Path):
    """Imports that run when the module is imported: top-level statements and the bodies of
    top-level if/try/with blocks, but not functions or classes."""
    todo = list(ast.parse(path.read_text(), str(path)).body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Import):
            yield from ((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
        elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)  # annotations only: never imported at run time
        elif isinstance(node, (ast.If, ast.Try, ast.With)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(node, field, []) or [])
        elif isinstance(node, ast.ExceptHandler):
            todo.extend(node.body)


def _light_files():
    for name in LIGHT:
        p = PKG / name
        yield from (sorted(p.rglob("*.py")) if p.is_dir() else [p])


def test_light_layers_import_no_heavy_package_at_module_level():
    bad = [f"{p.relative_to(PKG)}:{line} imports {mod}" for p in _light_files()
           for line, mod in _module_level_imports(p) if mod.split(".")[0] in HEAVY]
    assert not bad, bad


def test_the_module_level_scan_sees_a_heavy_import(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import os\nif True:\n    try:\n        import pandas as pd\n    except ImportError:\n"
                 "        pass\n\ndef f():\n    import torch\n\nif TYPE_CHECKING:\n    import triton\n")
    assert [m for _, m in _module_level_imports(f)] == ["pandas", "os"]


LOADERS = {"import_module", "spec_from_file_location", "exec_module", "run_path", "run_module", "__import__",
           "exec", "SourceFileLoader", "load_module"}


def test_claim_code_is_imported_only_by_the_side_processes():
    """Only `side/` may turn a path or a name from a claim into a module. The two other dynamic imports
    name fixed modules: the CLI's own command modules, and an extra's package (`extras.load`)."""
    found = []
    for p in PKG.rglob("*.py"):
        rel = p.relative_to(PKG)
        if rel.parts[0] == "side":
            continue
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
                if name in LOADERS:
                    found.append(f"{rel}:{node.lineno} {name}")
    assert found and {f.split(":")[0] for f in found} <= {"cli.py", "extras.py"}, found


def _lint(cwd: Path, src: Path) -> subprocess.CompletedProcess:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]')")
    env = {"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin", "PYTHONPATH": str(src)}
    return subprocess.run([exe, "--config", str(cwd / "pyproject.toml"), "--no-cache"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def test_import_contracts_hold():
    r = _lint(ROOT, ROOT / "src")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]


@pytest.mark.parametrize("plant, contract", [
    ("spec/claim.py", "Each stage imports only the stages below it"),      # a lower stage reaching up
    ("store/index.py", "The data layers never import the heavy packages"),  # a heavy import in the data layer
])
def test_a_planted_violation_breaks_the_contract(tmp_path, plant, contract):
    src = tmp_path / "src"
    shutil.copytree(PKG, src / "claimbench", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = src / "claimbench" / plant
    line = "import claimbench.runner\n" if plant.startswith("spec") else "import torch\n"
    target.write_text(target.read_text() + "\n\ndef _planted():\n    " + line)
    r = _lint(tmp_path, src)
    assert r.returncode != 0 and "BROKEN" in r.stdout and contract in r.stdout.split("Broken contracts")[-1], r.stdout[-3000:]


DOCUMENTED = ("orchestrator", "side")  # the trust boundary: a maintainer must know why each public name exists


def _undocumented(path: Path, base: Path) -> list[str]:
    out = []

    def visit(body, prefix: str) -> None:
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("_"):
                if not ast.get_docstring(n):
                    out.append(f"{path.relative_to(base).as_posix()}:{n.lineno} {prefix}{n.name}")
                if isinstance(n, ast.ClassDef):
                    visit(n.body, f"{prefix}{n.name}.")
    visit(ast.parse(path.read_text(encoding="utf-8")).body, "")
    return out


def test_every_public_name_in_run_and_side_says_why():
    missing = [m for pkg in DOCUMENTED for p in sorted((PKG / pkg).glob("*.py")) for m in _undocumented(p, PKG)]
    assert not missing, missing


def test_the_docstring_rule_sees_a_bare_public_name(tmp_path):
    bare = tmp_path / "bare.py"
    bare.write_text('class A:\n    def f(self):\n        return 1\n\n    def _g(self):\n        pass\n\n'
                    'def h():\n    """Why."""\n')
    assert _undocumented(bare, tmp_path) == ["bare.py:1 A", "bare.py:2 A.f"]
