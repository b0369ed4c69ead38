"""The temporary project the cheat tests run in, and the softmax claim each cheat is written into.

test_runner_cheats.py (CPU cheats) and test_gpu_cheats.py (GPU cheats, also driven by
scripts/gpucheck) both copy tests/fixtures into a fresh root and write one claim a case, so a
fixture kernel is judged by the same claim shape whichever suite runs it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures"

# What every fixture claim opens with; a template continues it from `workload:`.
HEAD = """\
id: {id}
title: {title} {id}
entry: Online Normalizer Calculation for Softmax
source: {{kind: implementer-report, title: fixture, url: "https://example.org/x", locator: "s1"}}
hardware: {{device: {device}, model: ["*"]}}
"""

# A softmax claim around a fixture kernel kernels/cheat/<file>.py; DEFAULTS and the fields fill it.
SOFTMAX = HEAD + """\
workload:
  inputs: kernels/softmax_cpu.py:make_inputs
  params: {params}
  check_params: [{{rows: 3, cols: 17}}, {{rows: 1, cols: 1}}]
  bytes: "{bytes}"
  memory: {{operands_bytes: "rows * cols * itemsize", output_elements: "rows * cols", reference_bytes: "2 * rows * cols * 8"}}
{flops}precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"{kernel_extra}}}
baseline: {{name: torch.softmax, impl: kernels/softmax_cpu.py:torch_softmax}}
correctness:
  method: allclose
  reference: {reference}
  max_rel_l2: 1.0e-5
  rtol: 1.0e-5
  atol: 1.0e-6
  trials: 2
  forbidden: [torch.softmax, torch.nn.functional.softmax]
{properties}claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

# A matmul claim (C = A @ B, no flops declared) and a sign-mask claim, for the issue 22 cheats whose
# trick needs compute-bound work to skip or an output dtype to shrink; the claimed value is `value`.
MATMUL = HEAD + """\
workload:
  inputs: kernels/cheat/matmul_task.py:make_inputs
  params: {{n: 1024}}
  check_params: [{{n: 17}}, {{n: 1}}]
  bytes: "12 * n * n"
  memory: {{operands_bytes: "2 * n * n * itemsize", output_elements: "n * n", reference_bytes: "2 * n * n * 8"}}
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.matmul, impl: kernels/cheat/matmul_task.py:torch_matmul}}
correctness: {{method: allclose, reference: kernels/cheat/matmul_task.py:reference_fp64, max_rel_l2: 1.0e-5,
  rtol: 1.0e-5, atol: 1.0e-4, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

# The same product on int64 inputs, none of them floating-point: the integer replay cheat's claim.
INT_MATMUL = HEAD + """\
workload:
  inputs: kernels/cheat/int_matmul_task.py:make_inputs
  params: {{n: 384}}
  check_params: [{{n: 17}}, {{n: 1}}]
precision: {{dtype: int64}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.matmul, impl: kernels/cheat/int_matmul_task.py:torch_matmul}}
correctness: {{method: exact, reference: kernels/cheat/int_matmul_task.py:reference_fp64, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

# The same product on int32 operands holding int8 values, scaled per output channel by a float32
# vector with no negative value (W8A8's scaled_mm with the quantization done by the task).
SCALED_INT_MATMUL = HEAD + """\
workload:
  inputs: kernels/cheat/scaled_int_matmul_task.py:make_inputs
  params: {{n: 384, unsigned: {unsigned}}}
  check_params: [{{n: 17}}, {{n: 1}}]
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.matmul, impl: kernels/cheat/scaled_int_matmul_task.py:torch_scaled_matmul}}
correctness: {{method: allclose, reference: kernels/cheat/scaled_int_matmul_task.py:reference_fp64, max_rel_l2: 1.0e-5,
  rtol: 1.0e-5, atol: 1.0e-4, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

# A sort of int64 values to 2^40 (an answer that depends only on the values' multiset) and an honest
# matmul whose task hands over a transposed (non-contiguous) B, for the integer and layout cases.
SORT = HEAD + """\
workload:
  inputs: kernels/cheat/int_sort_task.py:make_inputs
  params: {{n: 262144, cols: 512}}
  check_params: [{{n: 17}}, {{n: 1}}]
precision: {{dtype: int64}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.sort, impl: kernels/cheat/int_sort_task.py:torch_sort}}
correctness: {{method: exact, reference: kernels/cheat/int_sort_task.py:reference_fp64, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

TRANSPOSED_MATMUL = HEAD + """\
workload:
  inputs: kernels/cheat/transposed_task.py:make_inputs
  params: {{n: 256}}
  check_params: [{{n: 17}}, {{n: 1}}]
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.matmul, impl: kernels/cheat/transposed_task.py:torch_matmul}}
correctness: {{method: allclose, reference: kernels/cheat/transposed_task.py:reference_fp64, max_rel_l2: 1.0e-5,
  rtol: 1.0e-5, atol: 1.0e-4, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

MASK = HEAD + """\
workload:
  inputs: kernels/cheat/mask_task.py:make_inputs
  params: {{rows: 512, cols: 2048}}
  check_params: [{{rows: 3, cols: 17}}, {{rows: 1, cols: 1}}]
  bytes: "5 * rows * cols"
  memory: {{operands_bytes: "rows * cols * itemsize", output_elements: "rows * cols", reference_bytes: "rows * cols * 8"}}
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.gt, impl: kernels/cheat/mask_task.py:torch_mask}}
correctness: {{method: exact, reference: kernels/cheat/mask_task.py:reference_fp64, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

# A transpose claim, for the cheat that forges where its output lives: the answer is the input's own
# bytes under transposed strides, so a forged report of the output's location reads correct values.
TRANSPOSE = HEAD + """\
workload:
  inputs: kernels/cheat/transpose_task.py:make_inputs
  params: {{rows: 1024, cols: 1024}}
  check_params: [{{rows: 3, cols: 17}}, {{rows: 1, cols: 1}}]
  bytes: "8 * rows * cols"
  memory: {{operands_bytes: "rows * cols * itemsize", output_elements: "rows * cols", reference_bytes: "rows * cols * 8"}}
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.t, impl: kernels/cheat/transpose_task.py:torch_transpose}}
correctness: {{method: exact, reference: kernels/cheat/transpose_task.py:reference_fp64, trials: 2}}
claimed: {{metric: speedup, value: {value}, tolerance: 0.05}}
"""

# y = 2 x with an input `pad` nothing reads; `bytes` says whether the claim counts it (a GB/s claim).
UNREAD = HEAD + """\
workload:
  inputs: kernels/cheat/unread_task.py:make_inputs
  params: {{rows: 256, cols: 1024, pad: 10000000}}
  check_params: [{{rows: 17, cols: 300, pad: 5000}}, {{rows: 1, cols: 1, pad: 1}}]
  bytes: "{bytes}"
  memory: {{operands_bytes: "(rows * cols + pad) * itemsize", output_elements: "rows * cols", reference_bytes: "rows * cols * 8"}}
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/cheat/{file}.py:kernel"}}
baseline: {{name: torch.mul, impl: kernels/cheat/unread_task.py:torch_double}}
correctness: {{method: allclose, reference: kernels/cheat/unread_task.py:reference_fp64, max_rel_l2: 1.0e-6,
  rtol: 1.0e-6, atol: 1.0e-6, trials: 2}}
claimed: {{metric: gbps, value: {value}, tolerance: 0.05}}
"""

# `flops` and `properties` are whole YAML lines (with indent and newline) or empty: most cases declare none.
# `value` is the claimed speedup: 0.01 lets any correct kernel verify, so a cheat must be caught
# for what it does, not for its number.
DEFAULTS = {"title": "fixture", "device": "cpu", "params": "{rows: 64, cols: 250}",
            "bytes": "8 * rows * cols", "flops": "", "kernel_extra": "", "properties": "",
            "reference": "kernels/softmax_cpu.py:reference_fp64", "value": "0.01", "unsigned": "0"}


def make_project(root: Path) -> Path:
    """A copy of the fixture kernels and LIST.md under ``root``, with an empty claims/."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(FIXTURES / "kernels", root / "kernels", dirs_exist_ok=True)
    shutil.copy(FIXTURES / "LIST.md", root / "LIST.md")
    (root / "claims").mkdir(exist_ok=True)
    return root


def write_claim(project: Path, claim_id: str, file: str, *, template: str = SOFTMAX, **fields) -> Path:
    """claims/<claim_id>.yaml for the fixture kernel ``file``; ``fields`` override DEFAULTS."""
    path = project / "claims" / f"{claim_id}.yaml"
    path.write_text(template.format(id=claim_id, file=file, **{**DEFAULTS, **fields}))
    return path
