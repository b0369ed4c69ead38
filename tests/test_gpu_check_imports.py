"""The GPU check's stages import what exists: every `from claimbench... import name` in
scripts/gpucheck/ and scripts/gpu_check*, wherever it sits (most are inside the stage functions, so
importing the modules proves nothing), names a module and an attribute that are there.

The fidelity stage once imported `make_timer` from `claimbench.orchestrator.protocol` after it had moved:
the rehearsal did not notice, and the first GPU window would have lost the stage (issue 24)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = sorted((ROOT / "scripts" / "gpucheck").glob("*.py")) + sorted((ROOT / "scripts").glob("gpu_check*.py"))


def _imports(path: Path) -> list[tuple[int, str, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("claimbench"):
            out += [(node.lineno, node.module, a.name) for a in node.names]
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name, "") for a in node.names if a.name.startswith("claimbench")]
    return out


CASES = [(p, line, mod, name) for p in STAGES for line, mod, name in _imports(p)]


@pytest.mark.parametrize("path,line,module,name", CASES,
                         ids=[f"{p.name}:{line}:{name or mod}" for p, line, mod, name in CASES])
def test_every_claimbench_import_in_the_gpu_check_resolves(path, line, module, name):
    mod = importlib.import_module(module)
    if name and not hasattr(mod, name):
        importlib.import_module(f"{module}.{name}")  # a submodule is fine; anything else fails here


def test_a_planted_import_would_be_found(tmp_path):
    planted = tmp_path / "stage.py"
    planted.write_text("def stage():\n    from claimbench.orchestrator.protocol import make_timer\n")
    (line, module, name), = _imports(planted)
    with pytest.raises(ImportError):
        mod = importlib.import_module(module)
        if not hasattr(mod, name):
            importlib.import_module(f"{module}.{name}")
