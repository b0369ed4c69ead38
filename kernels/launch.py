"""Which tiles a Triton kernel launches with here: the GPU's, or small ones for the interpreter.

On a GPU every kernel launches with its fixed GPU configuration. On CPU, Triton's interpreter
runs the same code; small tiles keep it fast in CI. Setting CLAIMBENCH_GPU_TILES=1 makes the
interpreter launch with the GPU's tiles instead, so the multi-tile loops, masks and ragged tails
that a GPU runs at the claims' check shapes are exercised on a CPU too
(tests/kernels/test_gpu_tiles.py). Read at call time; nothing happens at import.
"""

from __future__ import annotations

import os

import torch


def interpreted(t: torch.Tensor) -> bool:
    """True when Triton runs in its CPU interpreter: no spin-waits, few persistent programs."""
    return os.environ.get("TRITON_INTERPRET") == "1" or not t.is_cuda


def gpu_tiles(t: torch.Tensor) -> bool:
    """True when the kernel should launch with its GPU tile configuration."""
    return os.environ.get("CLAIMBENCH_GPU_TILES") == "1" or not interpreted(t)
