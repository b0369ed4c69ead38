"""The GPU-only code paths compile for sm_90 here, with no GPU: Triton's own compiler and ptxas.

The interpreter never compiles anything, so the paths the CPU tests cannot run (the Stream-K
spin-wait, the flattened persistent loop, fp8 wgmma) and the real tile configs are compiled for
Hopper with the specializations the JIT would make for 16-byte-aligned tensors with unit inner
strides. Checked: shared memory fits an H100/H200 SM (227 KB), the GEMM main loops are
software-pipelined (cp.async) on wgmma, the tiles the derivations count as one program per SM
really take more than half the SM's shared memory, and ptxas reports no register spills.

tests/conftest.py turns the interpreter on for the whole session, and interpreted kernels cannot
be compiled, so the compiling runs in one child process (this file run as a script) without it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SMEM_PER_SM = 232448  # bytes of shared memory one block may use on sm_90 (227 KB)
LAUNCH = ("num_warps", "num_stages")


def _gemm_args(elem="*bf16", out="*bf16", b_k_major=False):
    args = dict(a_ptr=elem, b_ptr=elem, c_ptr=out, M="i32:16", N="i32:16", K="i32:16",
                stride_am="i32:16", stride_ak=1, stride_bk="i32:16", stride_bn=1,
                stride_cm="i32:16", stride_cn=1)
    if b_k_major:
        args.update(stride_bk=1, stride_bn="i32:16")
    return args


BF = "*bf16"


def _ints(*names: str) -> dict:
    return {n: "i32:16" for n in names}


def _cases() -> dict:
    """name: (kernel, argument types, constexprs and launch options, what to expect)."""
    from kernels.batch_invariant import matmul as BI
    from kernels.batch_invariant import rmsnorm as BR
    from kernels.block_sparse_attention import kernel as BSA
    from kernels.fp8_matmul import kernel as F8
    from kernels.kivi_decode import kernel as KIVI
    from kernels.matmul import kernel as G
    from kernels.matmul import persistent as P
    from kernels.matmul import tiles as GT
    from kernels.moe import kernel as MOE
    from kernels.roofline import kernel as R
    from kernels.sgemm import kernel as SG
    from kernels.softmax import kernel as S
    from kernels.softmax import task as ST
    from kernels.splitkv_decode import kernel as SPLIT
    from kernels.streamk import kernel as SK
    from kernels.streamk import task as SKT
    from kernels.w8a8 import kernel as W8

    row = dict(x_ptr="*bf16", y_ptr="*bf16", cols="i32:16", stride_x="i32:16", stride_y="i32:16")
    sk = dict(_gemm_args(), part_ptr="*fp32", own_ptr="*fp32", flag_ptr="*i32",
              steps_per_tile="i32:16", per="i32", extra="i32")
    fixup = dict(c_ptr="*bf16", part_ptr="*fp32", own_ptr="*fp32", flag_ptr="*i32", M="i32:16",
                 N="i32:16", stride_cm="i32:16", stride_cn=1, steps_per_tile="i32:16", per="i32",
                 extra="i32")
    fp8 = dict(_gemm_args("*fp8e4nv", "*bf16", b_k_major=True), scale_a_ptr="*fp32", scale_b_ptr="*fp32")
    norm = dict(x_ptr="*bf16", w_ptr="*bf16", y_ptr="*bf16", hidden="i32:16", stride_x="i32:16",
                stride_y="i32:16", eps="fp32")
    tile = dict(BLOCK_M=SKT.CONFIG["BLOCK_M"], BLOCK_N=SKT.CONFIG["BLOCK_N"], num_warps=8)
    return {
        "grouped-large": (G.grouped_kernel, _gemm_args(), dict(GT.CONFIG_LARGE, IEEE=False), "wgmma"),
        "grouped-skinny": (G.grouped_kernel, _gemm_args(),
                           dict(GT.CONFIG_SKINNY, BLOCK_M=32, IEEE=False), "pipelined"),
        "persistent": (P._persistent_kernel, dict(_gemm_args(), num_programs="i32"),
                       dict(GT.CONFIG_LARGE, IEEE=False), "wgmma"),
        "streamk-spin": (SK._streamk_kernel, sk, dict(SKT.CONFIG, SPIN=True, IEEE=False), "one-per-sm"),
        "streamk-portable": (SK._streamk_kernel, sk, dict(SKT.CONFIG, SPIN=False, IEEE=False), "one-per-sm"),
        "streamk-fixup": (SK._fixup_kernel, fixup, tile, ""),
        "data-parallel": (SKT._data_parallel_kernel, _gemm_args(), dict(SKT.CONFIG, IEEE=False), "one-per-sm"),
        "batch-invariant-matmul": (G.grouped_kernel, _gemm_args(), dict(BI.MATMUL_CONFIG, IEEE=False),
                                   "wgmma"),
        "fp8": (F8._fp8_kernel, fp8, dict(F8.CONFIG, IEEE=False), "fp8"),
        "softmax-online": (S._online_kernel, row, dict(ST.CONFIG), ""),
        "softmax-three-pass": (ST._three_pass_kernel, row, dict(ST.CONFIG), ""),
        "rmsnorm": (BR._rmsnorm_kernel, norm, dict(BLOCK=BR.RMSNORM_MAX_BLOCK, num_warps=BR.RMSNORM_WARPS), ""),
        "copy": (R._copy_kernel, dict(src_ptr="*bf16", dst_ptr="*bf16", n="i32:16"), dict(R.COPY_CONFIG), ""),
        "sgemm": (G.grouped_kernel, _gemm_args("*fp32", "*fp32"), dict(SG.SGEMM_CONFIG, IEEE=True), "fma"),
        "w8a8": (W8._w8a8_kernel, dict(_gemm_args("*i8", "*bf16", b_k_major=True), sa_ptr="*bf16", sb_ptr="*bf16"),
                 dict(W8.CONFIG), "int8"),
        "moe": (MOE._moe_kernel, dict(x_ptr=BF, w_ptr=BF, y_ptr=BF, pairs_ptr="*i32", tile_expert_ptr="*i32",
                                      tile_start_ptr="*i32", tile_end_ptr="*i32", topk="i32",
                                      **_ints("N", "K", "stride_xm", "stride_we", "stride_wn", "stride_ym")),
                dict(MOE.GPU_CONFIG, IEEE=False), "wgmma"),
        "block-sparse-attention": (BSA._bsa_fwd, dict(Q=BF, K=BF, V=BF, O=BF, Blocks="*i32", heads="i32", keep="i32",
                                                      qk_scale="fp32", **_ints("stride_qh", "stride_qm", "stride_kh", "stride_kn",
                                                                               "stride_vh", "stride_vn", "stride_oh", "stride_om",
                                                                               "stride_bb", "stride_bq", "seqlen", "head_dim")),
                                   dict(BSA.GPU_CONFIG, PATTERN_=128, BLOCK_D=128), "wgmma"),
        "splitkv-decode": (SPLIT._split_kernel, dict(Q=BF, K=BF, V=BF, Opart="*fp32", Lse="*fp32", group="i32", qk_scale="fp32",
                                                     **_ints("stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kn",
                                                             "stride_vb", "stride_vh", "stride_vn", "seqlen", "head_dim",
                                                             "q_heads", "num_splits")),
                           dict(SPLIT.GPU_CONFIG, BLOCK_G=16, BLOCK_D=128), ""),
        "splitkv-combine": (SPLIT._combine_kernel, dict(Opart="*fp32", Lse="*fp32", Out=BF,
                                                        **_ints("stride_ob", "stride_oh", "q_heads", "num_splits", "head_dim")),
                            dict(BLOCK_S=64, BLOCK_D=128, num_warps=4), ""),
        "kivi-decode": (KIVI._kivi_kernel, dict(Q=BF, Kp="*i32", Ks="*fp16", Kz="*fp16", Vp="*i32", Vs="*fp16", Vz="*fp16", O=BF,
                                                group="i32", qk_scale="fp32",
                                                **_ints("stride_qb", "stride_qh", "stride_kb", "stride_kh", "stride_kn", "stride_sb",
                                                        "stride_sh", "stride_sg", "stride_vb", "stride_vh", "stride_vn", "stride_tb",
                                                        "stride_th", "stride_ob", "stride_oh", "seqlen")),
                        dict(KIVI.GPU_CONFIG, KGROUP=64, BLOCK_G=16, D=128), ""),
    }


def compile_sm90(fn, arg_types: dict, params: dict):
    """``triton.compile`` for sm_90 as the JIT would specialize: ints equal to 1 become constants,
    pointers and ``:16`` ints are marked divisible by 16."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    consts = {k: v for k, v in params.items() if k not in LAUNCH}
    sig, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in consts:
            sig[name] = "constexpr"
            continue
        kind = arg_types[name]
        if kind == 1:
            sig[name], consts[name] = "constexpr", 1
            continue
        base, _, div = kind.partition(":")
        sig[name] = base
        if base.startswith("*") or div == "16":
            attrs[(i,)] = [["tt.divisibility", 16]]
    options = {k: params[k] for k in LAUNCH if k in params}
    src = ASTSource(fn=fn, signature=sig, constexprs=consts, attrs=attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=options)


def _spill_bytes(ptx: str) -> int | None:
    """Spill stores ptxas reports for the PTX, or None when Triton's ptxas cannot be found."""
    try:
        from triton.backends.nvidia.compiler import get_ptxas
        ptxas = get_ptxas(90).path
    except Exception:
        return None
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        out = subprocess.run([ptxas, "-arch=sm_90a", "-v", src, "-o", os.path.join(d, "k.cubin")],
                             capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return sum(int(n) for n in re.findall(r"(\d+) bytes spill stores", out.stdout + out.stderr))


def _facts(name: str, case) -> dict:
    fn, arg_types, params, expect = case
    k = compile_sm90(fn, arg_types, params)
    ttgir, ptx = k.asm["ttgir"], k.asm["ptx"]
    return dict(expect=expect, shared=k.metadata.shared, wgmma="warp_group_dot" in ttgir,
                pipelined="async_copy_global_to_local" in ttgir,
                e4m3_wgmma=bool(re.search(r"wgmma\.mma_async\S*\.e4m3\.e4m3", ptx)),
                s8_wgmma=bool(re.search(r"wgmma\.mma_async\S*\.s8\.s8", ptx)),
                any_mma=bool(re.search(r"\b(wgmma|mma)\.", ptx)), fma=len(re.findall(r"\bfma\.rn\.f32", ptx)),
                acquire_cas="atom.global.acquire.gpu.cas" in ptx,
                release_exch=bool(re.search(r"atom\.global\S*release\S*\.exch", ptx)),
                spills=_spill_bytes(ptx))


def _compile_all() -> dict:
    out = {}
    for name, case in _cases().items():
        try:
            out[name] = _facts(name, case)
        except Exception as e:  # reported per case by the test, not as one crash
            out[name] = {"error": f"{type(e).__name__}: {e}"[:3000]}
    return out


NAMES = ["batch-invariant-matmul", "block-sparse-attention", "copy", "data-parallel", "fp8", "grouped-large",
         "grouped-skinny", "kivi-decode", "moe", "persistent", "rmsnorm", "sgemm", "softmax-online",
         "softmax-three-pass", "splitkv-combine", "splitkv-decode", "streamk-fixup", "streamk-portable",
         "streamk-spin", "w8a8"]


@pytest.fixture(scope="module")
def compiled() -> dict:
    pytest.importorskip("triton.backends.nvidia.compiler")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, __file__], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", NAMES)
def test_compiles_for_sm90(compiled, name):
    r = compiled[name]
    assert "error" not in r, r.get("error")
    expect = r["expect"]
    assert r["shared"] <= SMEM_PER_SM
    if expect in ("wgmma", "one-per-sm", "fp8", "int8"):
        assert r["wgmma"], "the main loop should run on wgmma"
    if expect in ("wgmma", "one-per-sm", "fp8", "int8", "pipelined", "fma"):
        assert r["pipelined"], "the main loop should be software-pipelined (cp.async)"
    if expect == "one-per-sm":
        assert r["shared"] > SMEM_PER_SM // 2, "the wave count assumes one program per SM"
    if expect == "fp8":
        assert r["e4m3_wgmma"], "fp8 operands should reach wgmma as E4M3"
    if expect == "int8":
        assert r["s8_wgmma"], "int8 operands should reach wgmma as s8"
    if expect == "fma":
        assert not r["any_mma"] and r["fma"] > 0, "an SGEMM runs on the FMA units, no tensor cores (no TF32)"
    if name == "streamk-spin":
        assert r["acquire_cas"] and r["release_exch"], "the flag protocol needs acquire/release atomics"
    assert r["spills"] in (None, 0), f"{r['spills']} bytes of register spills"


def test_every_case_is_tested(compiled):
    assert sorted(compiled) == sorted(NAMES)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
    print(json.dumps(_compile_all()))
