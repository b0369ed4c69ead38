"""The Triton kernels behind the attention, decode and GEMV claims compile for sm_90 here, with no
GPU, at the tile configs their launchers pick on a GPU, and without register spills.

The interpreter runs these kernels on CPU but never lowers them, so it cannot see a bf16 tl.dot
that fails to lower, a tile that does not fit, or spills (local memory on the very path whose
bandwidth or rate the claims state). Triton compiles them ahead of time for a GPUTarget; ptxas
(bundled with Triton) writes the cubin; cuobjdump reports registers and stack. This runs in a
subprocess because tests/conftest.py sets TRITON_INTERPRET=1 before the kernels are imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, re, subprocess, sys, tempfile
from pathlib import Path
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import kernels.attention.kernel as A, kernels.gqa_decode.decode as G, kernels.paged_decode.decode as P, kernels.weight_only_gemv.kernel as W

cuobjdump = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
target = GPUTarget("cuda", 90, 32)

def sig(names, ptrs, floats=(), consts=()):
    s = {n: t for n, t in ptrs.items()}
    s.update({n: "i32" for n in names})
    s.update({n: "fp32" for n in floats})
    s.update({n: "constexpr" for n in consts})
    return s

BF = "*bf16"
attn = sig(["stride_qh", "stride_qm", "stride_kh", "stride_kn", "stride_vh", "stride_vn", "stride_oh",
            "stride_om", "seqlen", "head_dim"], {"Q": BF, "K": BF, "V": BF, "O": BF}, ["qk_scale"],
           ["BLOCK_M", "BLOCK_N", "BLOCK_D", "CAUSAL", "EVEN_N"])
gqa = sig(["stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kn", "stride_vb", "stride_vh",
           "stride_vn", "stride_ob", "stride_oh", "seqlen", "head_dim", "group"],
          {"Q": BF, "K": BF, "V": BF, "O": BF}, ["qk_scale"], ["BLOCK_G", "BLOCK_N", "BLOCK_D"])
def paged(p):
    t = "*i32" if p else BF
    return sig(["stride_qb", "stride_qh", "stride_k0", "stride_kh", "stride_kn", "stride_v0", "stride_vh",
                "stride_vn", "stride_ob", "stride_oh", "stride_bt", "seqlen_arg", "head_dim", "group"],
               {"Q": BF, "K": BF, "V": BF, "O": BF, "BlockTable": t, "SeqLens": t}, ["qk_scale"],
               ["PAGED", "PAGE", "BLOCK_G", "BLOCK_N", "BLOCK_D"])
gemv = sig(["rows", "cols", "words", "stride_w"], {"X": BF, "W": "*i32", "S": "*fp32", "Y": BF}, [],
           ["BLOCK_N", "BLOCK_W"])

def launch_cfg(cfg):
    opts = {k: cfg.pop(k) for k in ("num_warps", "num_stages")}
    return cfg, opts

jobs = []
for causal in (False, True):
    c, o = launch_cfg(A._config(True, 64))
    jobs.append((f"attention D=64 causal={causal}", A._attn_fwd, attn,
                 dict(c, BLOCK_D=64, CAUSAL=causal, EVEN_N=True), o))
for block_g in (1, 16):
    jobs.append((f"gqa_decode BLOCK_G={block_g}", G._decode_kernel, gqa,
                 dict(BLOCK_G=block_g, BLOCK_D=128), {}))
for p in (True, False):
    jobs.append((f"paged_decode PAGED={p}", P._decode_kernel, paged(p),
                 dict(PAGED=p, PAGE=P.PAGE_SIZE, BLOCK_G=16, BLOCK_D=128), {}))
jobs.append(("int4_gemv", W._gemv_int4_kernel, gemv, {}, {}))
configs = {"gqa_decode": G.GPU_CONFIG, "paged_decode": P.GPU_CONFIG, "int4_gemv": W.GPU_CONFIG}

report = {}
for name, fn, signature, consts, opts in jobs:
    if not opts:
        extra, opts = launch_cfg(dict(configs[name.split()[0]]))
        consts = dict(consts, **extra)
    k = triton.compile(ASTSource(fn=fn, signature=signature, constexprs=consts), target=target, options=opts)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(k.asm["cubin"]); f.flush()
        usage = subprocess.run([str(cuobjdump), "--dump-resource-usage", f.name], capture_output=True, text=True).stdout
    regs = int(re.search(r"REG:(\d+)", usage).group(1))
    stack = int(re.search(r"STACK:(\d+)", usage).group(1))
    report[name] = {"registers": regs, "stack": stack, "shared": k.metadata.shared,
                    "wgmma_or_mma": bool(re.search(r"\b(wgmma|mma)\.", k.asm["ptx"]))}
print(json.dumps(report))
'''


@pytest.fixture(scope="module")
def report() -> dict:
    bindir = Path(__import__("triton").__file__).parent / "backends" / "nvidia" / "bin"
    if not (bindir / "ptxas").exists() or not (bindir / "cuobjdump").exists():
        pytest.skip("Triton's bundled ptxas/cuobjdump not found")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_variant_compiles(report):
    assert set(report) == {"attention D=64 causal=False", "attention D=64 causal=True",
                           "gqa_decode BLOCK_G=1", "gqa_decode BLOCK_G=16",
                           "paged_decode PAGED=True", "paged_decode PAGED=False", "int4_gemv"}


def test_no_register_spills(report):
    spilled = {name: r for name, r in report.items() if r["stack"] > 0}
    assert not spilled, spilled


def test_matrix_units_where_the_kernel_uses_tl_dot(report):
    for name, r in report.items():
        uses_dot = name.startswith(("attention", "paged_decode")) or name == "gqa_decode BLOCK_G=16"
        assert r["wgmma_or_mma"] == uses_dot, name
