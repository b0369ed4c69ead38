"""The interpreter's dot (claimbench/side/interpret.py): a row's bits do not depend on its position
in the tile or on its neighbours, on any CPU, and the fork server's sides get it."""

from __future__ import annotations

import numpy as np
import pytest

from claimbench.side import interpret

pytest.importorskip("triton")


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
