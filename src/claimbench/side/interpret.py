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

The interpreter also re-patches `triton.language` on every call of a `@triton.jit` helper from
inside a kernel (`InterpretedFunction.__call__` runs `_patch_lang`: `inspect.getmembers` over
four modules, per call, per program), though the launch (`GridExecutor.__call__`) already patched
the same modules and restores them when it returns; the helper's patch is discarded unrestored.
That was 14.5% of a flash-attention claim's CPU check (py-spy). So inside a launch, a helper's
patch runs once per set of language modules: Triton's own patch the first time (a helper of
Triton's standard library names `triton.language.core`, which the kernel's launch did not patch,
and Triton leaves that patch in place), and an empty one after, when it would only set the same
attributes again.

And it computes its integer-overflow check on every 32-bit `+`, `-` and `*` (`sanitize_overflow`:
the operation again in int64, two comparisons, an `and`), then hands the result to `device_assert`,
which drops it unless the builder's options have `debug` on. The interpreter's options never do
(neither `@triton.jit(debug=True)` nor `TRITON_DEBUG=1` reaches them in Triton 3.9), so the check was
never seen, and it was 22% of the streamk claim's CPU check (py-spy). It is skipped exactly when
`device_assert` would drop it; where `debug` is on, it runs and asserts as before (tested).
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import weakref
from typing import Any

import numpy as np

_INSTALLED = "_claimbench_position_independent_dot"
# the running launch, per thread: .opening (its own patch is still to come) and .patched (the ids of the
# language modules patched so far, or None outside a launch)
_launch = threading.local()
_LANGUAGES: "weakref.WeakKeyDictionary[Any, tuple[int, frozenset]]" = weakref.WeakKeyDictionary()


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
    _patch_once_per_launch(ti)
    _overflow_check_only_when_asserted()
    setattr(builder, _INSTALLED, True)
    return True


def _languages(ti, fn) -> frozenset:
    """The ids of the language modules ``fn``'s globals name: what Triton's `_patch_lang` patches.

    Kept per function while its globals hold as many names: a helper is called once per program
    and per loop step, and scanning a module's globals each time was 3% of a flash-attention
    claim's CPU check (py-spy). A module binds its language imports once, at import."""
    names = len(fn.__globals__)
    hit = _LANGUAGES.get(fn)
    if hit is not None and hit[0] == names:
        return hit[1]
    lang = (ti.tl, ti.tl.core)
    found = frozenset(id(v) for v in fn.__globals__.values() if inspect.ismodule(v) and any(v is m for m in lang))
    _LANGUAGES[fn] = (names, found)
    return found


def _patch_once_per_launch(ti) -> None:
    """`_patch_lang` inside a launch that already patched the helper's modules returns an empty scope."""
    patch_lang, launch = ti._patch_lang, ti.GridExecutor.__call__

    def patch_once(fn):
        patched = getattr(_launch, "patched", None)
        langs = _languages(ti, fn)
        if patched is not None and langs and langs <= patched:
            return ti._LangPatchScope()  # the running launch patched these and restores them
        scope = patch_lang(fn)
        if getattr(_launch, "opening", False):  # the launch's own patch, before any program runs
            _launch.opening, _launch.patched = False, langs
        elif patched is not None:  # a helper's patch, which Triton never restores: later calls change nothing
            _launch.patched = patched | langs
        return scope

    def launch_patching_once(self, *args, **kwargs):
        saved = getattr(_launch, "patched", None), getattr(_launch, "opening", False)
        _launch.patched, _launch.opening = None, True
        try:
            return launch(self, *args, **kwargs)
        finally:
            _launch.patched, _launch.opening = saved

    ti._patch_lang = patch_once
    ti.GridExecutor.__call__ = launch_patching_once


def _overflow_check_only_when_asserted() -> None:
    """`binary_op_sanitize_overflow_impl` returns at once where `device_assert` would drop its finding."""
    from triton.language.semantic import TritonSemantic

    check = TritonSemantic.binary_op_sanitize_overflow_impl

    def sanitize_if_debug(self, lhs, rhs, binary_op):  # noqa: PLR0917 (Triton's own signature)
        if not self.builder.options.debug:
            return None  # device_assert returns without asserting: nothing the check computes is used
        return check(self, lhs, rhs, binary_op)

    TritonSemantic.binary_op_sanitize_overflow_impl = sanitize_if_debug
