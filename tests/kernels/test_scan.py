"""kernels/scan/: the CPU emulation of the look-back scan, and (on a GPU) the kernel itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from torch.utils._python_dispatch import TorchDispatchMode

from kernels.scan import kernel as S
from kernels.scan import task as ST

CLAIM = yaml.safe_load((Path(__file__).resolve().parents[2] / "claims" / "scan-lookback-cupy.yaml").read_text())
CHECK_N = [p["n"] for p in CLAIM["workload"]["check_params"]]


def _x(n, seed=0, device="cpu"):
    return ST.make_inputs(seed=seed, device=device, dtype="int32", n=n)[0]


def _exact(out, x):
    return out.dtype == torch.int32 and out.shape == x.shape and torch.equal(out.to(torch.float64),
                                                                             ST.reference_fp64(x))


@pytest.mark.parametrize("n", CHECK_N + [2, S.TILE - 1, S.TILE, S.TILE + 1, 3 * S.TILE])
def test_emulation_is_exact(n):
    x = _x(n)
    assert _exact(S.scan_lookback(x), x)


@pytest.mark.parametrize("wave", [1, 2, 31, 33, 100])
def test_every_schedule_gives_the_same_exact_answer(wave):
    """wave=1: each block finds P next door; larger waves make it add up aggregates (A)."""
    x = _x(70 * S.TILE + 123, seed=wave)
    stats: dict = {}
    assert _exact(S._emulate(x, wave=wave, stats=stats), x)
    parts = 71
    if wave == 1:
        assert stats["windows"] == parts - 1                # one window per block, P at lane 0
    if wave >= 33:
        assert stats["windows"] > parts - 1                 # some look-backs crossed a window


def test_look_back_sums_aggregates_up_to_the_nearest_inclusive_prefix():
    flags = torch.tensor([S.FLAG_P] + [S.FLAG_A] * 40 + [S.FLAG_P] + [S.FLAG_A] * 3)
    values = torch.arange(1, 46, dtype=torch.int64)
    stats: dict = {}
    # pid 45 looks at 44, 43, 42 (A) then 41 (P): 45 + 44 + 43 + 42.
    assert S._look_back(flags, values, 45, stats) == 45 + 44 + 43 + 42 and stats["windows"] == 1
    # pid 41 sees 40 aggregates (two windows) and then partition 0's P.
    assert S._look_back(flags, values, 41, stats) == sum(range(1, 42))
    flags[3] = S.FLAG_X
    with pytest.raises(AssertionError):                      # would wait: an X before the P
        S._look_back(flags, values, 10, {})


def test_int32_wraps_like_the_gpu():
    x = torch.tensor([2**31 - 1, 1, 5], dtype=torch.int32)
    assert S.scan_lookback(x).tolist() == [2**31 - 1, -(2**31), -(2**31) + 5]


class _Ops(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.seen = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.add(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def test_emulation_never_runs_the_forbidden_cumsum():
    x = _x(2 * S.TILE + 9)
    with _Ops() as rec:
        S.scan_lookback(x)
    assert not {"cumsum", "_cumsum"} & rec.seen


def test_seeds_give_different_inputs():
    a, b = _x(1000, seed=1), _x(1000, seed=2)
    assert not torch.equal(a, b) and int(a.abs().max()) <= 1000


def test_refuses_other_dtypes():
    with pytest.raises(ValueError):
        ST.make_inputs(seed=0, device="cpu", dtype="float32", n=8)
    with pytest.raises(ValueError):
        S.scan_lookback(torch.ones(8, dtype=torch.int64))


@pytest.mark.gpu
@pytest.mark.parametrize("n", CHECK_N + [S.TILE, (1 << 24) + 3])
@pytest.mark.parametrize("offset", [0, 1], ids=["aligned", "unaligned"])
def test_cuda_kernel_is_exact(n, offset):
    """Large n puts thousands of partitions in flight: the real look-back, with spin-waits."""
    pytest.importorskip("cupy")
    x = _x(n + offset, seed=n, device="cuda")[offset:]
    out = S.scan_lookback(x)
    torch.cuda.synchronize()
    assert out.is_cuda and _exact(out.cpu(), x.cpu())
    assert torch.equal(out, ST.torch_cumsum(x))
