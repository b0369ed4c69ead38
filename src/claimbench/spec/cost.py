"""What one process of a claim should cost, in seconds, from its own declarations, before it runs:
the run's time limit per claim, and the GPU check's order and budgets (scripts/gpucheck/plan.py),
come from it instead of one constant for every claim.

The parts (docs/gpu_check.md, "The budget"; each measured on this project's 2-core CPU machine or
estimated for the H200 and marked so there):
- `claimbench run` before its child starts: 8 s (interpreter, imports, NVML and CUDA detection);
  the child's three sides from the fork server: 5 s (one torch import and CUDA context each,
  forked); each Triton or CuPy side's first call compiles: 4 s. A side whose module calls
  `torch.compile` compiles once per shape, with `dynamic=False` at every check shape and the
  claim's own: 15 s each (14.8 s measured for one flex_attention shape through Inductor's CPU
  backend here; a GPU's Triton template is taken as no cheaper).
- Verification, on the host: one trial compares the kernel's and the baseline's outputs with the
  float64 reference and runs the null models, 15 ns an element here (`benchmarks/verify_scale.py`:
  4.05 s at 2^28), taken as 25 ns with the staging and decoding around it; each timed round
  rechecks one output, 8 ns an element; each trial or check shape adds 0.2 s of exchanges.
- Timing: the warm-up and the timed rounds' cap.

The time limit is a multiple of that estimate with a floor, since the estimate leaves out what a
busy machine adds and what only the claim's code decides (its own speed at the check shapes): an
honest claim must never meet it, a hung one should not hold a CI runner for a quarter of an hour.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from claimbench.spec import expr
from claimbench.spec.bounded import UnreadableFile, read_text
from claimbench.spec.claim import Claim

PARENT_S, SIDES_S, COMPILE_S, GRAPH_COMPILE_S = 8.0, 5.0, 4.0, 15.0
TRIAL_NS, RECHECK_NS, EXCHANGE_S = 25.0, 8.0, 0.2
ROUNDS = 10                # timed rounds a claim gets in its max time, each with one full recheck
DEFAULT_OUTPUT = 1 << 24   # output elements of a claim that declares no workload.memory
LIMIT_FACTOR = 4.0         # the time limit: this many times the estimate ...
LIMIT_FLOOR_S = 300.0      # ... and never less
OFF_HARDWARE_LIMIT_S = 900.0  # a correctness check off the claim's hardware (the Triton interpreter,
                              # whose speed this model does not cover): the old constant


@dataclass(frozen=True)
class ClaimCost:
    """One claim process's estimated seconds, by part, and how sure its path is."""

    claim: str
    startup_s: float
    verification_s: float
    timing_s: float
    certain: bool      # one GPU, torch or Triton sides, no graph compiled

    @property
    def total_s(self) -> float:
        return self.startup_s + self.verification_s + self.timing_s


def estimate(claim: Claim, root: Path, *, max_time_s: float, warmup_s: float) -> ClaimCost:
    """The estimate for ``claim`` (its `workload.memory` gives the output's elements), with the
    timed rounds capped at ``max_time_s`` after ``warmup_s`` of warm-up."""
    w = claim.workload
    out = expr.evaluate(w.memory.output_elements, {**w.params, "itemsize": 2}) if w.memory else DEFAULT_OUTPUT
    backends = (claim.kernel.backend or "torch", claim.baseline.backend or "torch")
    graphs = sum(compiles_graph(root, side.impl) for side in (claim.kernel, claim.baseline))
    startup = PARENT_S + SIDES_S + COMPILE_S * sum(b in ("triton", "cupy") for b in backends)
    startup += GRAPH_COMPILE_S * graphs * (len(w.check_params) + 1)
    trials = claim.correctness.trials + len(w.check_params)
    verification = out * 1e-9 * (claim.correctness.trials * TRIAL_NS + ROUNDS * RECHECK_NS) + EXCHANGE_S * trials
    certain = claim.hardware.count == 1 and "cupy" not in backends and not graphs
    return ClaimCost(claim.id, round(startup, 1), round(verification, 1), round(max_time_s + warmup_s, 1), certain)


def time_limit_s(cost: ClaimCost) -> float:
    """The per-process limit a run gives a claim it measures: LIMIT_FACTOR x the estimate, at least
    LIMIT_FLOOR_S."""
    return round(max(LIMIT_FLOOR_S, LIMIT_FACTOR * cost.total_s), 1)


def compiles_graph(root: Path, impl: str) -> bool:
    """Whether a side's module calls `torch.compile` (parsed, not imported: no claim code runs here)."""
    try:
        tree = ast.parse(read_text(root / impl.split(":", 1)[0], what="kernel source"))
    except (UnreadableFile, SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "compile"
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "torch" for n in ast.walk(tree))
