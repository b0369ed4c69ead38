"""kernels/reduction/: the CPU emulation of the CUDA sum, and (on a GPU) the kernel itself."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch.utils._python_dispatch import TorchDispatchMode

from kernels.reduction import kernel as R
from kernels.reduction import task as RT

CLAIM = yaml.safe_load((Path(__file__).resolve().parents[2] / "claims" / "reduction-sum-cupy.yaml").read_text())
CHECK_N = [p["n"] for p in CLAIM["workload"]["check_params"]]
MAX_REL = CLAIM["correctness"]["max_rel_l2"]


def _x(n, seed=0, device="cpu"):
    return RT.make_inputs(seed=seed, device=device, dtype="float32", n=n)[0]


def _rel(out, x):
    ref = float(RT.reference_fp64(x))
    return abs(float(out) - ref) / ref


@pytest.mark.parametrize("n", CHECK_N + [4, 1024, 4 * 256 * 4 + 5])
def test_emulation_within_the_claims_tolerance(n):
    x = _x(n)
    out = R.reduce_sum(x)
    assert out.shape == () and out.dtype == torch.float32
    assert _rel(out, x) <= MAX_REL


@pytest.mark.parametrize("offset", [1, 2, 3])
def test_unaligned_start_uses_the_scalar_head(offset):
    x = _x(4099)[offset:]
    n, head, n4 = R._layout(x)
    assert head == (4 - offset) % 4 and head + 4 * n4 <= n
    assert _rel(R.reduce_sum(x), x) <= MAX_REL


@pytest.mark.parametrize("grid", [1, 3, 1056])
def test_any_grid_size_sums_everything(grid):
    x = _x(100_003)
    assert _rel(R._emulate(x, grid=grid), x) <= MAX_REL


def test_deterministic_and_order_matters():
    x = _x(65537)
    assert torch.equal(R.reduce_sum(x), R.reduce_sum(x))
    # A different grid adds in a different order: the emulation really follows the grid.
    sums = {float(R._emulate(x, grid=g)) for g in (1, 2, 5, 17, 64)}
    assert len(sums) > 1


def _thread_by_thread(x: torch.Tensor, grid: int) -> np.float32:
    """A literal per-thread transcription of reduction.cu in numpy float32, for a small grid."""
    f = np.float32
    n, head, n4 = R._layout(x)
    v = x.numpy()
    body = v[head: head + 4 * n4].reshape(-1, 4)
    stride = grid * R.BLOCK
    tail0 = head + 4 * n4
    s = np.zeros(stride, dtype=np.float32)
    for t in range(stride):
        acc = np.zeros(4, dtype=np.float32)
        base = t
        while base < n4:
            loads = [body[base + u * stride] if base + u * stride < n4 else np.zeros(4, np.float32)
                     for u in range(R.UNROLL)]
            for ld in loads:
                acc = (acc + ld).astype(np.float32)
            base += R.UNROLL * stride
        st = f(f(acc[0] + acc[1]) + f(acc[2] + acc[3]))
        if t < head:
            st = f(st + v[t])
        if t < n - tail0:
            st = f(st + v[tail0 + t])
        s[t] = st

    def warp0(vals):
        vals = vals.copy()
        for off in (16, 8, 4, 2, 1):
            vals[:off] = (vals[:off] + vals[off:2 * off]).astype(np.float32)
        return vals[0]

    def block(vals):
        lanes = np.zeros(32, np.float32)
        lanes[: R.BLOCK // 32] = [warp0(vals[w * 32:(w + 1) * 32]) for w in range(R.BLOCK // 32)]
        return warp0(lanes)

    partials = [block(s[b * R.BLOCK:(b + 1) * R.BLOCK]) for b in range(grid)]
    t = np.zeros(R.BLOCK, np.float32)
    for i in range(R.BLOCK):
        for j in range(i, grid, R.BLOCK):
            t[i] = f(t[i] + partials[j])
    return block(t)


@pytest.mark.parametrize("n,grid,offset", [(1, 1, 0), (2 * 4 * 256 * 4 + 7, 1, 0), (9001, 3, 1), (5000, 2, 3)])
def test_emulation_adds_in_the_kernels_order_bitwise(n, grid, offset):
    x = _x(n + offset, seed=n)[offset:]
    assert np.float32(R._emulate(x, grid=grid).item()) == _thread_by_thread(x, grid)


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_emulation_never_runs_the_forbidden_sum():
    x = _x(1021)
    with _Ops() as rec:
        R.reduce_sum(x)
    assert "sum" not in rec.seen and "add" in rec.seen


def test_seeds_give_different_inputs_all_positive():
    a, b = _x(1000, seed=1), _x(1000, seed=2)
    assert not torch.equal(a, b) and bool((a >= 0).all()) and bool((a > 0).any())


def test_refuses_other_dtypes_and_layouts():
    with pytest.raises(ValueError):
        RT.make_inputs(seed=0, device="cpu", dtype="float16", n=8)
    with pytest.raises(ValueError):
        R.reduce_sum(torch.ones(8, dtype=torch.float64))
    with pytest.raises(ValueError):
        R.reduce_sum(torch.ones(4, 4))


@pytest.mark.gpu
@pytest.mark.parametrize("n", CHECK_N + [(1 << 24) + 3])
def test_cuda_kernel_matches_reference_and_emulation(n):
    pytest.importorskip("cupy")
    x = _x(n, seed=5, device="cuda")
    out = R.reduce_sum(x)
    again = R.reduce_sum(x)
    torch.cuda.synchronize()
    assert out.is_cuda and out.shape == () and torch.equal(out, again)
    assert _rel(out.cpu(), x.cpu()) <= MAX_REL
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    grid = R.num_blocks(R._layout(x)[2], sms)
    assert out.item() == R._emulate(x.cpu(), grid=grid).item()   # same additions, same order
