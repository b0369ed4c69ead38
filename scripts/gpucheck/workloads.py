"""The kernels the fidelity and sanitizer stages run, with their inputs at H200 and CPU sizes.

Fidelity spans about 5 us to 5 ms: a tiny elementwise Triton kernel (launch-dominated), the
online softmax (~0.1 ms, memory-bound), the grouped GEMM at 4096^3 (~0.25 ms) and the fused
attention forward (~2-3 ms). `regex` is the GPU kernel's name as ncu reports it (Triton names
a kernel after its function). CPU sizes exist only to rehearse the control flow under
TRITON_INTERPRET=1. Nothing here runs at import.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
import triton
import triton.language as tl


@triton.jit
def _gc_tiny_scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


def tiny_scale(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    block = 1024
    _gc_tiny_scale[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return y


def tiny_inputs(*, seed: int, device: str, dtype: str, n: int):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=g).to(device=device, dtype=getattr(torch, dtype)),)


@dataclass(frozen=True)
class Workload:
    name: str
    module: str            # the kernel's module; "" for the tiny kernel defined here
    fn: str
    regex: str             # kernel name for ncu -k regex:
    gpu: dict
    cpu: dict
    dtype: tuple[str, str] = ("bfloat16", "float32")   # (gpu, cpu)
    target: float = 0.03   # allowed |ratio - 1| against each independent timer
    note: str = ""
    extra: dict = field(default_factory=dict)
    task: str = ""         # the module whose make_inputs draws the inputs (the kernel's task side)


FIDELITY = (
    Workload("tiny", "", "tiny_scale", "_gc_tiny_scale", {"n": 1 << 18}, {"n": 1000},
             dtype=("float32", "float32"), target=0.10, note="1 MB elementwise, ~3-5 us"),
    Workload("softmax", "kernels.softmax.kernel", "online_softmax", "_online_kernel",
             {"rows": 8192, "cols": 8192}, {"rows": 3, "cols": 100}, note="128 MB bf16 rows, ~0.1 ms",
             task="kernels.softmax.task"),
    Workload("gemm", "kernels.matmul.kernel", "grouped_matmul", "grouped_kernel",
             {"M": 4096, "N": 4096, "K": 4096}, {"M": 32, "N": 32, "K": 32}, note="4096^3 bf16, ~0.25 ms",
             task="kernels.matmul.task"),
    Workload("attention", "kernels.attention.kernel", "flash_attention", "_attn_fwd",
             {"batch": 4, "heads": 32, "seqlen": 4096, "head_dim": 64},
             {"batch": 1, "heads": 1, "seqlen": 32, "head_dim": 16}, note="B4 H32 N4096 D64 bf16, ~2-3 ms",
             task="kernels.attention.task"),
)


class Missing(Exception):
    """A workload's kernel module or function is not in this tree."""


def build(w: Workload, device: str, seed: int = 0) -> tuple[Callable[[], Any], dict]:
    """A no-argument call of the kernel on fixed inputs, and a description of them."""
    if w.module:
        try:
            mod = importlib.import_module(w.module)
            task = importlib.import_module(w.task or w.module)
        except ModuleNotFoundError as e:
            raise Missing(f"{w.module}: {e}") from None
        fn, make = getattr(mod, w.fn, None), getattr(task, "make_inputs", None)
        if fn is None or make is None:
            raise Missing(f"{w.module} lacks {w.fn}, or {w.task or w.module} lacks make_inputs")
    else:
        fn, make = tiny_scale, tiny_inputs
    params = w.gpu if device == "cuda" else w.cpu
    dtype = w.dtype[0] if device == "cuda" else w.dtype[1]
    inputs = make(seed=seed, device=device, dtype=dtype, **params)
    inputs = tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)
    nbytes = sum(t.numel() * t.element_size() for t in inputs if isinstance(t, torch.Tensor))
    return (lambda: fn(*inputs)), {"params": params, "dtype": dtype, "input_bytes": nbytes}


def by_name(names: list[str]) -> list[Workload]:
    table = {w.name: w for w in FIDELITY}
    return [table[n] for n in names if n in table]


# ---- sanitizer targets: small sizes that still exercise the cross-block protocols ----------

def scan_case(device: str) -> tuple[Callable[[], Any], Callable[[Any], tuple[bool, str]]]:
    """41 partitions of 4096 plus a ragged tail: the look-back crosses a 32-partition window."""
    from kernels.scan import kernel as scan
    from kernels.scan import task
    (x,) = task.make_inputs(seed=3, device=device, dtype="int32", n=41 * scan.TILE + 3)
    want = torch.cumsum(x.cpu().to(torch.int64), 0).to(torch.int32)

    def check(out) -> tuple[bool, str]:
        got = out.cpu()
        ok = bool(torch.equal(got, want))
        return ok, "exact" if ok else f"{int((got != want).sum())} of {want.numel()} elements differ"
    return (lambda: scan.scan_lookback(x)), check


def streamk_case(device: str) -> tuple[Callable[[], Any], Callable[[Any], tuple[bool, str]]]:
    """Six 128x128 tiles of 32 k-steps over 16 programs: every tile is split between programs,
    so the fix-up runs, and only 16 blocks must be resident for the spin-waits to end even if
    the sanitizer's instrumentation lowers occupancy."""
    from kernels.matmul import task
    from kernels.streamk import kernel as streamk
    shape = dict(M=256, N=384, K=2048) if device == "cuda" else dict(M=37, N=70, K=53)
    dtype = "bfloat16" if device == "cuda" else "float32"
    a, b = task.make_inputs(seed=3, device=device, dtype=dtype, **shape)
    ref = task.reference_fp64(a.cpu(), b.cpu())

    def check(out) -> tuple[bool, str]:
        err = float(torch.linalg.vector_norm(out.cpu().double() - ref) / torch.linalg.vector_norm(ref))
        return err < 1e-2, f"rel L2 {err:.2e}"
    programs = 16 if device == "cuda" else None
    return (lambda: streamk.streamk_matmul(a, b, num_programs=programs)), check


SANITIZE = {"scan": scan_case, "streamk": streamk_case}
