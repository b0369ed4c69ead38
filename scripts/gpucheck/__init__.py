"""Stages of scripts/gpu_check.py, the one prepared run on a lent H200 (issue 7).

Each stage runs in its own process, started by the orchestrator with a deadline, so a hang or a
crash costs only that stage, and so no stage's CUDA context is alive while claims are run (the
runner refuses `verified` when another process holds the GPU). Modules here import torch only
inside the stage functions: the orchestrator never touches the GPU.
"""
