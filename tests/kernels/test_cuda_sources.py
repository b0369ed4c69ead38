"""The CUDA C behind the CuPy claims compiles for sm_90, standalone, without spilling.

No GPU here: nvcc compiles each ``kernels/*.cu`` to a cubin and ptxas's resource report
(``-Xptxas -v``) is read back. Spills would turn the register-resident tiles and accumulators into
local-memory traffic on the very path whose bandwidth the claims state. The register ceilings are
the ones the launch geometry needs for its occupancy. Correctness of the CUDA code needs a GPU
(the ``gpu`` tests in the per-kernel files).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[2] / "kernels"

# file -> kernel -> what ptxas must report. max_registers: 65536 registers / (threads per SM).
EXPECTED = {
    "transpose/transpose.cu": {
        "transpose_tiled_32x33": {"smem": 32 * 33 * 4, "barriers": 1, "max_registers": 64},
        "transpose_naive_32x8": {"smem": 0, "barriers": 0, "max_registers": 64},
    },
    "reduction/reduction.cu": {"reduce_sum_f32": {"max_registers": 32}},   # 8 blocks x 256 threads per SM
    "scan/scan.cu": {"scan_lookback_i32": {"max_registers": 40}},     # 6 blocks x 256 threads per SM
}
# the modules that launch each .cu's kernels (the transpose baseline's launch lives on the task side)
PY_FOR_CU = {"transpose/transpose.cu": ("transpose/kernel.py", "transpose/task.py"),
             "reduction/reduction.cu": ("reduction/kernel.py",), "scan/scan.cu": ("scan/kernel.py",)}


def parse_ptxas(text: str) -> dict[str, dict[str, int]]:
    """ptxas -v output -> {kernel: {registers, stack, spill_stores, spill_loads, smem, barriers}}."""
    out: dict[str, dict[str, int]] = {}
    current = None
    for line in text.splitlines():
        if m := re.search(r"Function properties for (\S+)", line):
            current = out.setdefault(m.group(1), {"smem": 0, "barriers": 0})
        elif current is not None and (m := re.search(
                r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)):
            current.update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
        elif current is not None and (m := re.search(r"Used (\d+) registers", line)):
            current["registers"] = int(m[1])
            if b := re.search(r"used (\d+) barriers", line):
                current["barriers"] = int(b[1])
            if s := re.search(r"(\d+) bytes smem", line):
                current["smem"] = int(s[1])
    return out


@pytest.fixture(scope="session")
def ptxas(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found; the CUDA sources are compile-checked where nvcc is installed")
    out = tmp_path_factory.mktemp("cubin")

    def build(name: str):
        cmd = [nvcc, "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", str(out / f"{Path(name).name}.cubin"),
               str(KERNELS / name)]
        return name, subprocess.run(cmd, capture_output=True, text=True, timeout=300)

    with ThreadPoolExecutor(len(EXPECTED)) as pool:
        return dict(pool.map(build, EXPECTED))


def test_parse_ptxas_reads_a_report():
    text = """ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 16944 bytes smem, 376 bytes cmem[0]
"""
    assert parse_ptxas(text) == {"k": {"stack": 8, "spill_stores": 4, "spill_loads": 12,
                                       "registers": 40, "barriers": 1, "smem": 16944}}


@pytest.mark.parametrize("cu", sorted(EXPECTED))
def test_compiles_standalone_for_sm90(ptxas, cu):
    proc = ptxas[cu]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "warning" not in proc.stderr.lower(), proc.stderr[-3000:]


@pytest.mark.parametrize("cu,kernel", [(cu, k) for cu, ks in sorted(EXPECTED.items()) for k in ks])
def test_no_spills_and_registers_fit_the_occupancy(ptxas, cu, kernel):
    report = parse_ptxas(ptxas[cu].stdout + ptxas[cu].stderr)
    assert kernel in report, f"ptxas reported no entry `{kernel}` (extern \"C\" name?): {sorted(report)}"
    got, want = report[kernel], EXPECTED[cu][kernel]
    assert (got["stack"], got["spill_stores"], got["spill_loads"]) == (0, 0, 0), got
    assert got["registers"] <= want["max_registers"], got
    for key in ("smem", "barriers"):
        if key in want:
            assert got[key] == want[key], (key, got)


@pytest.mark.parametrize("cu", sorted(EXPECTED))
def test_entry_points_match_what_python_launches(cu):
    """The .cu exports exactly the expected extern "C" kernels, and its .py names each of them."""
    source = (KERNELS / cu).read_text()
    exported = set(re.findall(r'extern\s+"C"\s+__global__\s+void\s+(?:__launch_bounds__\([^)]*\)\s+)?(\w+)\s*\(',
                              source))
    assert exported == set(EXPECTED[cu])
    py = "".join((KERNELS / f).read_text() for f in PY_FOR_CU[cu])
    for name in exported:
        assert f'"{name}"' in py, f"{PY_FOR_CU[cu]} never launches {name}"
    assert f'with_name("{Path(cu).name}")' in py


@pytest.mark.parametrize("py", sorted(f for files in PY_FOR_CU.values() for f in files))
def test_module_does_no_work_at_import(py):
    """cupy is imported, and the .cu read, only inside functions: import stays free."""
    tree = ast.parse((KERNELS / py).read_text())
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            assert not any(n.split(".")[0] == "cupy" for n in names), f"{py}: top-level cupy import"
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)):
            calls = [c for c in ast.walk(node) if isinstance(c, ast.Call)]
            attrs = {c.func.attr for c in calls if isinstance(c.func, ast.Attribute)}
            assert "read_text" not in attrs and "RawModule" not in attrs, f"{py}: work at import"
