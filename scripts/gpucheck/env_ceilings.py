"""Stages `env` and `ceilings`: what machine this is, and what it can do.

`env` saves the detected hardware to hardware.json, which later stages read instead of
detecting again. `ceilings` measures through claimbench's own code into the results cache the
claims then reuse, so every record of this run is judged against the same ceilings.
"""

from __future__ import annotations

import json
import platform
import shutil
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING

from .stage_io import REFERENCE, Ctx, run_cmd, say, tail, write_result

CEILING_DTYPES = ("bfloat16", "float16", "tf32", "float8_e4m3fn", "float32", "int8")
TOOLS = (("nvcc", "--version"), ("ncu", "--version"), ("compute-sanitizer", "--version"))

if TYPE_CHECKING:
    from claimbench.machine.ceilings import Ceilings


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def env_stage(ctx: Ctx) -> None:
    art = ctx.art_path
    smi = shutil.which("nvidia-smi")
    if smi:
        p = run_cmd([smi], timeout_s=min(20.0, max(2.0, ctx.left_s() / 3)), log=art / "nvidia-smi.txt")
        say(p.out.rstrip() or p.err.rstrip())
        q = run_cmd([smi, "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,"
                     "power.draw,power.limit,persistence_mode,mig.mode.current", "--format=csv"],
                    timeout_s=min(20.0, max(2.0, ctx.left_s() / 3)))
        say(q.out.rstrip())
    else:
        say("nvidia-smi: not on PATH (no NVIDIA driver here)")
    from claimbench.machine.detect import detect
    from claimbench.machine.hardware import blockers
    hw = detect(Path(ctx.root))
    (art / "hardware.json").write_text(json.dumps(hw.to_dict(), indent=1, default=str))
    say(f"claimbench detect: device={hw.device} name={hw.name!r} slug={hw.slug}")
    for g in hw.gpus:
        say(f"  gpu {g.index}: {g.name} cc {g.compute_capability}, {g.sm_count} SMs, L2 {g.l2_bytes} B, "
            f"mem {g.memory_bytes} B, driver {g.driver_version} (CUDA {g.cuda_version}), "
            f"SM {g.sm_clock_mhz}/{g.max_sm_clock_mhz} MHz, {g.temperature_c} C, {g.power_w}/{g.power_limit_w} W, "
            f"mig {g.mig_enabled}, ecc {g.ecc_enabled}, other processes {list(g.other_processes)}")
    sw = hw.software
    say(f"  cpu: {hw.cpu.model}, {hw.cpu.cores} cores")
    say(f"  software: python {sw.python}, torch {sw.torch} (cuda {sw.cuda_runtime}), triton {sw.triton}, "
        f"cupy {sw.cupy}, numpy {sw.numpy}, claimbench {sw.claimbench}")
    say(f"  git: commit {sw.git_commit}, dirty {sw.git_dirty}")
    say(f"  also: pydantic {_version('pydantic')}, pyyaml {_version('PyYAML')}, nvidia-ml-py {_version('nvidia-ml-py')}, "
        f"platform {platform.platform()}")
    for tool, flag in TOOLS:
        path = shutil.which(tool)
        if path:
            v = run_cmd([path, flag], timeout_s=15.0)
            say(f"  {tool}: {tail(v.out, 1) or tail(v.err, 1)}")
        else:
            say(f"  {tool}: not on PATH")
    blocks = blockers(hw)
    for b in blocks:
        say(f"  BLOCKER for verified: {b}")
    want = "cpu" if ctx.dry_run else "cuda"
    status = "ok" if hw.device == want and not blocks else "fail"
    why = f"{hw.name} ({hw.device})" + (f"; blockers: {'; '.join(blocks)}" if blocks else "")
    if hw.device != want:
        why += f"; expected a {want} device"
    if not sw.git_commit:
        why += "; no git commit (pass --commit)"
    write_result(ctx, "env", status, why, {"hardware": hw.to_dict(), "blockers": blocks})


def rehearsal_ceilings(ctx: Ctx, project: Path) -> "Ceilings":
    """The CPU rehearsal's ceilings, measured small once and cached where every `claimbench run` of
    the rehearsal looks (`--ceilings`, the results cache), as the GPU's ceilings are. Before, the
    smoke claim found that cache empty and measured the CPU at full size (about 7 CPU-s on a
    2-core VM), and this stage then measured again, small."""
    from claimbench.machine.ceilings import load_or_measure
    from claimbench.machine.detect import detect

    # small: numbers that mean nothing off the GPU
    return load_or_measure(Path(ctx.results) / ".cache", detect(project), ("float32",), copy_bytes=32 << 20,
                           matmul_n=256, reps=3)


def ceilings_stage(ctx: Ctx) -> None:
    from claimbench.machine.ceilings import load_or_measure
    from claimbench.machine.hardware import Hardware

    from .stage_io import load_json

    art = ctx.art_path
    if ctx.device == "cuda":
        saved = load_json(art / "hardware.json")
        if saved:
            hw = Hardware.from_dict(saved)
        else:
            from claimbench.machine.detect import detect
            hw = detect(Path(ctx.root))
        if hw.device != "cuda":
            write_result(ctx, "ceilings", "fail", f"no CUDA device detected ({hw.name})")
            say("ceilings: no CUDA device detected; nothing measured")
            return
        c = load_or_measure(Path(ctx.results) / ".cache", hw, CEILING_DTYPES)
    else:
        say("ceilings: dry run: a small CPU measurement, shared with the rehearsal's claims "
            "(the ratios to the H200 figures mean nothing here)")
        c = rehearsal_ceilings(ctx, Path(ctx.root))
    (art / "ceilings.json").write_text(json.dumps(c.to_dict(), indent=1))
    copy = c.details.get("copy_gbps") or c.bandwidth_gbps
    say(f"ceilings ({c.device}, measured {c.measured_at}):")
    say(f"  copy {copy:.0f} GB/s (read+write), read-only {c.details.get('read_gbps', 0):.0f} GB/s, "
        f"bandwidth ceiling {c.bandwidth_gbps:.0f} GB/s")
    for k, v in c.matrix_tflops.items():
        say(f"  matmul {k:9s} {'-' if v is None else f'{v:.1f}'} TFLOP/s")
    r_copy = copy / REFERENCE["copy_gbps"]
    bf16 = c.matrix_tflops.get("bfloat16")
    r_bf16 = bf16 / REFERENCE["bfloat16_tflops"] if bf16 else None
    say(f"  vs reference: copy {r_copy:.3f}x of {REFERENCE['copy_gbps']:.0f} GB/s, bf16 "
        f"{'-' if r_bf16 is None else f'{r_bf16:.3f}x'} of {REFERENCE['bfloat16_tflops']:.0f} TFLOP/s")
    near = r_bf16 is not None and 0.9 <= r_copy <= 1.1 and 0.9 <= r_bf16 <= 1.1
    status = "ok" if near else ("partial" if ctx.dry_run else "miss")
    summary = (f"copy {copy:.0f} GB/s ({r_copy:.2f}x ref), bf16 "
               f"{'-' if bf16 is None else f'{bf16:.0f}'} TFLOP/s ({'-' if r_bf16 is None else f'{r_bf16:.2f}x'} ref)")
    write_result(ctx, "ceilings", status, summary, {"ceilings": c.to_dict(), "ratio_copy": r_copy, "ratio_bf16": r_bf16})
