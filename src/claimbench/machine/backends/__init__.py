"""Backends plug in here, in one ordered registry: torch, triton, cupy, cpu.

A backend says whether it can run on this machine for a claim's device, and what the child
process needs. Some of that environment is read when a package is imported, not when it is used:
Triton decides at import whether its own standard library (`tl.max`, `tl.sum`, ...) is compiled or
interpreted, so `TRITON_INTERPRET=1` set after `import triton` gives an interpreted kernel calling
compiled helpers, which fails ("Cannot call @triton.jit'd outside of the scope of a kernel").
Such keys are listed in IMPORT_TIME_ENV: a side that needs one is forked from a fork server that
had it in its environment before it imported anything (orchestrator/servers.py keys servers by them).
"""

from __future__ import annotations

import ast
import importlib.util
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Backend:
    name: str
    runs_on: tuple[str, ...]
    cpu_env: dict = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    cpu_note: str = ""

    def is_available(self, device: str, cuda_present: bool) -> tuple[bool, str]:
        missing = [m for m in self.needs if importlib.util.find_spec(m) is None]
        if missing:
            return False, f"{self.name} backend needs {', '.join(missing)}, which is not installed"
        if device == "cuda" and not cuda_present:
            return False, f"{self.name} on cuda needs a GPU"
        if device not in self.runs_on:
            return False, f"{self.name} cannot run on {device}"
        return True, ""

    def env(self, device: str) -> dict:
        return dict(self.cpu_env) if device == "cpu" else {}


# Environment read by a package at import: a fork server started without it cannot give it to a side.
IMPORT_TIME_ENV = ("TRITON_INTERPRET",)

REGISTRY: tuple[Backend, ...] = (
    Backend("torch", ("cuda", "cpu"), needs=("torch",)),
    Backend("triton", ("cuda", "cpu"), cpu_env={"TRITON_INTERPRET": "1"}, needs=("torch", "triton"),
            cpu_note="Triton interpreter on CPU tensors"),
    Backend("cupy", ("cuda", "cpu"), needs=("torch",),
            cpu_note="CPU path of the kernel module (the CUDA C itself needs the GPU)"),
    Backend("cpu", ("cpu",), needs=("torch",)),
)


def get(name: str) -> Backend:
    for b in REGISTRY:
        if b.name == name:
            return b
    raise KeyError(name)


def infer(path: Path) -> str:
    """The backend a kernel file implies from its imports, when the claim names none."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, UnicodeDecodeError):
        return "torch"
    mods: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            mods.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods.add(node.module.split(".")[0])
    for name in ("cupy", "triton"):
        if name in mods:
            return name
    return "torch"


def child_env(backends: list[str], device: str) -> dict:
    """The environment a claim's sides get beyond the run's own.

    On a CPU every side has Triton's import-time switch set, whatever its backends: there Triton can
    only run interpreted, so the switch changes nothing for a torch or CuPy claim, and all of a CPU
    run's claims then come from one fork server instead of two (a torch import less per run, about
    2 CPU-s on a 2-core machine). A GPU side's environment is only what its backends ask for."""
    env: dict = dict(get("triton").cpu_env) if device == "cpu" else {}
    for name in backends:
        env.update(get(name).env(device))
    return env


def import_env(env: dict) -> dict[str, str]:
    """The part of a side's environment that must be set before its fork server imports torch and
    Triton: every IMPORT_TIME_ENV key, unset ones as "" so that two servers never disagree silently."""
    return {key: str(env.get(key, "")) for key in IMPORT_TIME_ENV}

