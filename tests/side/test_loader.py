"""side/loader.py: the kernel files a side loaded, found without resolving the fork server's own
modules again in every side (`remember_preloaded`), and never hidden by that shortcut."""

from __future__ import annotations

import sys
import types

import pytest

from claimbench.side import loader


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    (tmp_path / "kernels" / "k.py").write_text("def kernel(x):\n    return x\n")
    monkeypatch.setattr(loader, "_PRELOADED", dict(loader._PRELOADED))
    theirs = _take_kernels_modules()  # the repository's own `kernels`, when another test imported it
    yield tmp_path
    _take_kernels_modules()
    sys.modules.update(theirs)
    sys.path[:] = [p for p in sys.path if p != str(tmp_path)]


def _take_kernels_modules() -> dict:
    out = {n: sys.modules.pop(n) for n in list(sys.modules) if n == "kernels" or n.startswith("kernels.")}
    return out


def test_a_kernel_module_loaded_after_the_snapshot_is_found(project):
    loader.remember_preloaded()
    loader.load(project, "kernels/k.py:kernel")
    assert loader.project_modules(project) == ["kernels/__init__.py", "kernels/k.py"]


def test_a_preloaded_module_pointed_at_a_kernel_file_is_not_skipped(project):
    """The shortcut trusts a module only while it is the same object with the same `__file__` as when
    the server took its snapshot: a side that points one at a kernel file is seen."""
    fake = types.ModuleType("claimbench_test_preloaded")
    fake.__file__ = "/nonexistent/elsewhere.py"
    sys.modules[fake.__name__] = fake
    try:
        loader.remember_preloaded()
        assert loader.project_modules(project) == []
        fake.__file__ = str(project / "kernels" / "k.py")
        assert loader.project_modules(project) == ["kernels/k.py"]
        other = types.ModuleType(fake.__name__)  # replaced in sys.modules under the same name
        other.__file__ = str(project / "kernels" / "__init__.py")
        sys.modules[fake.__name__] = other
        assert loader.project_modules(project) == ["kernels/__init__.py"]
    finally:
        sys.modules.pop(fake.__name__, None)


def test_without_a_snapshot_every_module_is_resolved(project):
    loader._PRELOADED.clear()
    loader.load(project, "kernels/k.py:kernel")
    assert loader.project_modules(project) == ["kernels/__init__.py", "kernels/k.py"]


def test_a_planted_bytecode_file_is_never_run_in_place_of_the_source(tmp_path):
    """A kernel with write access (`--sandbox none`) can plant `kernels/__pycache__/x.cpython-*.pyc`
    whose header copies x.py's mtime and size; the file census leaves `__pycache__` alone, and
    Python would run the planted code in a later side (a task's reference made to agree with a
    wrong kernel) while the record hashed x.py. The side imports project files from source."""
    import importlib.util
    import os
    import subprocess
    from importlib._bootstrap_external import _code_to_timestamp_pyc  # how CPython writes one

    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "__init__.py").write_text("")
    src = tmp_path / "kernels" / "task.py"
    src.write_text("def reference(x):\n    return x + 1\n")
    st = os.stat(src)
    forged = compile("def reference(x):\n    return x - 1\n", str(src), "exec")
    pyc = importlib.util.cache_from_source(str(src))
    os.makedirs(os.path.dirname(pyc))
    with open(pyc, "wb") as f:
        f.write(_code_to_timestamp_pyc(forged, int(st.st_mtime), st.st_size))
    code = ("import sys; from pathlib import Path; from claimbench.side.loader import load; "
            f"print(load(Path({str(tmp_path)!r}), 'kernels/task.py:reference')(10))")
    plain = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
                            "import kernels.task; print(kernels.task.reference(10))"],
                           capture_output=True, text=True, timeout=60)
    assert plain.stdout.strip() == "9", plain.stdout + plain.stderr  # the plant works on plain Python
    side = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert side.stdout.strip() == "11", side.stdout + side.stderr
