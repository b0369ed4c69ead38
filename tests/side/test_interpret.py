"""The interpreter's dot (claimbench/side/interpret.py): a row's bits do not depend on its position
in the tile or on its neighbours, on any CPU, and the fork server's sides get it."""

from __future__ import annotations

import numpy as np
import pytest

from claimbench.side import interpret

triton = pytest.importorskip("triton")
tl = pytest.importorskip("triton.language")


def _tiles(rng, n=50):
    for _ in range(n):
        yield rng.standard_normal((32, 32)).astype(np.float32), rng.standard_normal((32, 32)).astype(np.float32)


def test_a_rows_bits_do_not_depend_on_its_position_or_its_neighbours():
    rng = np.random.default_rng(0)
    for a, b in _tiles(rng):
        c = interpret.dot(a, b, np.float32)
        assert np.array_equal(np.roll(c, 5, axis=0), interpret.dot(np.roll(a, 5, axis=0), b, np.float32))
        assert np.array_equal(np.roll(c, 3, axis=1), interpret.dot(a, np.roll(b, 3, axis=1), np.float32))
        padded = a.copy()
        padded[20:] = 0
        assert np.array_equal(interpret.dot(padded, b, np.float32)[:20], interpret.dot(a[:20], b, np.float32))


def test_it_is_the_same_product_to_float32_rounding():
    rng = np.random.default_rng(1)
    for a, b in _tiles(rng, 10):
        exact = a.astype(np.float64) @ b.astype(np.float64)
        np.testing.assert_allclose(interpret.dot(a, b, np.float32), exact, rtol=1e-5, atol=1e-5)
    batched = rng.standard_normal((3, 8, 16)).astype(np.float32), rng.standard_normal((3, 16, 4)).astype(np.float32)
    np.testing.assert_allclose(interpret.dot(*batched, np.float32), np.matmul(*batched), rtol=1e-5, atol=1e-5)


def test_the_tests_run_with_it_installed():
    """tests/conftest.py installs it for every test once Triton is imported, as the fork server
    does for every side."""
    import triton.runtime.interpreter as ti

    assert getattr(ti.InterpreterBuilder, interpret._INSTALLED, False)


def test_the_fork_server_installs_it_before_any_side_is_forked():
    """Read from the server's own code: the install follows the Triton import, before the loop forks."""
    import inspect

    from claimbench.side import server

    src = inspect.getsource(server.main)
    assert src.index("import triton") < src.index("interpret.install()") < src.index("_fork_side(")



@triton.jit
def _scaled(x, s):
    return x * s


@triton.jit
def _helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Every program calls a jit helper of its own and one of Triton's standard library (`tl.max`,
    whose module names `triton.language.core`, not `triton.language`)."""
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    for _ in range(3):
        x = _scaled(x, 2.0)
    tl.store(out_ptr + offs, x + tl.max(x, axis=0), mask=offs < n)

def test_a_launch_patches_the_language_once_per_module_set_and_computes_the_same(monkeypatch):
    """`_patch_lang` ran per helper call per program (14.5% of a flash-attention check); inside a
    launch it now runs once per set of language modules, with the same results, and the launch
    still restores what it patched."""
    import torch
    import triton.runtime.interpreter as ti

    if not interpret.install():
        pytest.skip("Triton is not interpreted here")
    calls = []
    real = ti._patch_builtin
    monkeypatch.setattr(ti, "_patch_builtin", lambda *a: calls.append(a[0]) or real(*a))
    x = torch.arange(40, dtype=torch.float32)
    out = torch.empty_like(x)
    _helper_kernel[(5,)](x, out, 40, BLOCK=8)
    ref = (x * 8).reshape(5, 8)
    assert torch.equal(out, (ref + ref.max(dim=1, keepdim=True).values).reshape(-1))
    # the launch patched tl, tl.tensor, tl.math and the descriptor base once; each helper's module set
    # (the kernel module's {tl}, Triton's standard library's {tl.core}) at most once more: never per program
    assert len(calls) <= 4 + 2 * 4, len(calls)
    assert tl.core.is_builtin(tl.load)  # restored after the launch, as Triton's own launch does


def test_the_language_modules_a_helper_names_are_read_again_when_its_globals_grow():
    """`_languages` is kept per function (3% of a flash-attention check was its scan of the globals),
    but a name bound later in the helper's module is seen: the count of globals is the key."""
    import triton.runtime.interpreter as ti

    scope: dict = {}
    exec("def helper():\n    return 0\n", scope)
    fn = scope["helper"]
    assert interpret._languages(ti, fn) == frozenset()
    scope["tl"] = ti.tl
    assert interpret._languages(ti, fn) == frozenset({id(ti.tl)})
    scope["core"] = ti.tl.core
    assert interpret._languages(ti, fn) == frozenset({id(ti.tl), id(ti.tl.core)})


@triton.jit
def _wrapping_kernel(x_ptr, out_ptr):
    offs = tl.arange(0, 4)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 1000000)  # int32 overflow: wraps


def test_the_overflow_check_runs_only_where_device_assert_would_assert(monkeypatch):
    """`sanitize_overflow` fed `device_assert`, which drops its finding with `debug` off (the
    interpreter's options always have it off): the same wrapped values without the check, and with
    `debug` on the check still runs and asserts."""
    import torch
    import triton.runtime.interpreter as ti
    from triton.language.semantic import TritonSemantic

    if not interpret.install():
        pytest.skip("Triton is not interpreted here")
    asserted = []
    device_assert = TritonSemantic.device_assert
    monkeypatch.setattr(TritonSemantic, "device_assert", lambda *a: asserted.append(a[2]) or device_assert(*a))
    x = torch.full((4,), 100000, dtype=torch.int32)
    out = torch.empty_like(x)
    _wrapping_kernel[(1,)](x, out)
    assert out.tolist() == [int(np.array([100000 * 1000000], dtype=np.int64).astype(np.int32)[0])] * 4
    assert asserted == []  # nothing computed for a device_assert that would drop it
    monkeypatch.setattr(ti.interpreter_builder, "options", ti.InterpreterOptions(debug=True))
    with pytest.raises(Exception, match="int32 overflow detected for operation mul"):  # InterpreterError
        _wrapping_kernel[(1,)](x, out)
