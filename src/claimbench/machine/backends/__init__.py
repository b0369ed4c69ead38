"""Backends plug in here, in one ordered registry: torch, triton, cupy, cpu.

A backend says whether it can run on this machine for a claim's device, and what the child
process needs (Triton's interpreter is switched on by environment before triton is imported).
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
    env: dict = {}
    for name in backends:
        env.update(get(name).env(device))
    return env

