"""The Triton interpreter's `tl.dot`, made to add each output element's products in an order that
does not depend on where its row or column sits in the tile, as a GPU's MMA instruction does.

Why: without a GPU, a Triton claim's kernel runs in the interpreter (`TRITON_INTERPRET=1`), whose
`tl.dot` is `np.matmul` on the tile, so the BLAS numpy was built with decides its arithmetic, and
OpenBLAS picks its sgemm kernel by CPU. On this project's AMD EPYC machines (OpenBLAS 0.3.31,
numpy 2.4) the float32 product of a row depends on its position in the tile: of 200 random
32x32 tiles rolled by 5 rows, all 200 gave other bits. A kernel whose rows are batch-invariant on
the GPU (one tile shape, no split-K) then failed its `batch-invariant` check on those CPUs and
passed on Intel Xeons: the CPU check said something about the BLAS, not the kernel.

`np.einsum` without path optimization computes every output element with the same loop, adding
the products in k order, so a row's bits cannot depend on its neighbours or its position (checked
in tests/side/test_interpret.py with the roll above, on the machine that failed). It is about
2.4x slower than `np.matmul` on a 128x64 @ 64x128 tile, which the interpreter's own overhead
dwarfs. Nothing else changes: the same operands, the same accumulator dtype, fp8 widened to fp16
first as the interpreter does. Compiled Triton on a GPU never reaches this code.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

_INSTALLED = "_claimbench_position_independent_dot"


def dot(a: np.ndarray, b: np.ndarray, acc_dtype: Any) -> np.ndarray:
    """``a @ b`` over the last two axes, each output element's products added in k order."""
    return np.einsum("...ik,...kj->...ij", a, b, dtype=acc_dtype, optimize=False)


def install() -> bool:
    """Replaces the interpreter's `create_dot` when Triton runs interpreted in this process; returns
    whether the replacement is in place. Called by the fork server after it imports Triton (every
    side inherits it) and by the test suite, whose kernel tests run the interpreter in-process."""
    if os.environ.get("TRITON_INTERPRET") != "1" or "triton" not in sys.modules:
        return False
    from triton.runtime import interpreter as ti

    builder = ti.InterpreterBuilder
    if getattr(builder, _INSTALLED, False):
        return True
    original = builder.create_dot

    def create_dot(self, a, b, d, input_precision, max_num_imprecise_acc):  # noqa: PLR0917 (Triton's own signature)
        if not (a.dtype.is_floating() or b.dtype.is_floating()):
            return original(self, a, b, d, input_precision, max_num_imprecise_acc)  # integers are exact
        a_data, b_data = a.data, b.data
        if (a.dtype.primitive_bitwidth == 8 and a.dtype.is_floating()) or \
           (b.dtype.primitive_bitwidth == 8 and b.dtype.is_floating()):
            a_data = ti._convert_float(a_data, a.dtype, ti.tl.float16, None).view(np.float16)
            b_data = ti._convert_float(b_data, b.dtype, ti.tl.float16, None).view(np.float16)
        return ti.TensorHandle(dot(a_data, b_data, d.data.dtype) + d.data, d.dtype.scalar)

    builder.create_dot = create_dot
    setattr(builder, _INSTALLED, True)
    return True
