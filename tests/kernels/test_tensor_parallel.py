"""kernels/tensor_parallel/: the row-parallel linear on 2 gloo ranks on CPU, against the whole
layer (the baseline) and the float64 reference, at the claim's check shapes."""

from __future__ import annotations

import os
import socket

import torch.distributed as dist
import torch.multiprocessing as mp
from kernel_claims import load_claim

CLAIM = "tp-row-parallel-linear-2gpu"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank: int, world: int, port: int, shapes: list, errors) -> None:
    from kernel_claims import ROOT  # noqa: F401  (puts the project on sys.path in the child)

    from kernels.tensor_parallel import kernel as K
    from kernels.tensor_parallel import task as T
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        for params in shapes:
            x, w = T.make_inputs(seed=11 + rank, device="cpu", dtype="float32", **params)
            ref = T.reference_fp64(x, w)
            out = K.row_parallel_linear(x, w).double()
            base = T.full_linear(*T.gather_full(x, w)).double()
            for name, got in (("kernel", out), ("baseline", base)):
                err = float((got - ref).norm() / ref.norm())
                if not err < 1e-5:
                    errors.put(f"rank {rank} {name} {params}: rel L2 {err:.2e}")
    finally:
        dist.destroy_process_group()


def test_both_ranks_match_the_reference():
    shapes = load_claim(CLAIM)["workload"]["check_params"]
    ctx = mp.get_context("spawn")
    errors = ctx.Queue()
    port = _free_port()
    procs = [ctx.Process(target=_rank, args=(r, 2, port, shapes, errors)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    found = []
    while not errors.empty():
        found.append(errors.get())
    assert not found, found


def test_shards_split_k_evenly():
    from kernels.tensor_parallel import task as T
    x, w = T.make_inputs(seed=0, device="cpu", dtype="float32", M=5, K=12, N=7, world=2)
    assert x.shape == (5, 6) and w.shape == (6, 7)
    try:
        T.make_inputs(seed=0, device="cpu", dtype="float32", M=5, K=13, N=7, world=2)
    except ValueError:
        return
    raise AssertionError("an odd K was split")
