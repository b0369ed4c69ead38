"""What a CUDA claim should cost on the H200, from its own declarations, so the claims stage runs
the cheapest and most certain first and gives each a budget from its cost instead of an equal share.

The parts (docs/gpu_check.md, "The budget"):
- `claimbench run` before its child starts: 8 s (interpreter, imports, NVML and CUDA detection);
  the child's three sides from the fork server: 5 s (one torch import and CUDA context each,
  forked); each Triton side's first call compiles: 4 s. A side whose code calls `torch.compile`
  (the block-sparse claim's flex_attention baseline) compiles once per shape, with `dynamic=False`
  at every check shape and the claim's own: 15 s each (14.8 s measured for one flex_attention
  shape through Inductor's CPU backend here; the GPU's Triton template is taken as no cheaper).
- Verification, on the host: one trial compares the kernel's and the baseline's outputs with the
  float64 reference and runs the null models, 15 ns an element on this project's 2-core CPU
  machine (`benchmarks/verify_scale.py`: 4.05 s at 2^28), taken as 25 ns with the staging and
  decoding around it; each timed round rechecks one output, 8 ns an element (compare alone).
  The references run on the device (float64 on Hopper's FP64 units), milliseconds to a second.
- Timing: the warm-up and the timed rounds' `--max-time-s`.
"Most certain" is a claim on one GPU whose sides are torch or Triton and compile no graph: CuPy
compiles CUDA C at first call (nvcc in-process), `torch.compile` has never run in a confined side
on a GPU, and multi-rank claims need two GPUs, so those go last.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

PARENT_S, SIDES_S, COMPILE_S, GRAPH_COMPILE_S = 8.0, 5.0, 4.0, 15.0
TRIAL_NS, RECHECK_NS = 25.0, 8.0
ROUNDS = 10           # timed rounds a claim gets in its max time, each with one full recheck
MAX_TIME_S, WARMUP_S = 4.0, 1.0


@dataclass(frozen=True)
class ClaimCost:
    """One claim's estimated seconds on the H200, by part, and how sure its path is."""

    claim: str
    startup_s: float
    verification_s: float
    timing_s: float
    certain: bool      # one GPU, torch or Triton sides

    @property
    def total_s(self) -> float:
        return self.startup_s + self.verification_s + self.timing_s


def cost(path: Path) -> ClaimCost:
    """The estimate for the claim at ``path`` (its `workload.memory` gives the output's elements)."""
    from claimbench.spec import expr
    from claimbench.spec.claim import Claim
    from claimbench.spec.yamlsafe import load_document

    claim = Claim.model_validate(load_document(path).data)
    w = claim.workload
    out = expr.evaluate(w.memory.output_elements, {**w.params, "itemsize": 2}) if w.memory else 1 << 24
    backends = (claim.kernel.backend or "torch", claim.baseline.backend or "torch")
    graphs = sum(_compiles_graph(path.parent.parent, side.impl) for side in (claim.kernel, claim.baseline))
    startup = PARENT_S + SIDES_S + COMPILE_S * sum(b in ("triton", "cupy") for b in backends)
    startup += GRAPH_COMPILE_S * graphs * (len(w.check_params) + 1)
    trials = claim.correctness.trials + len(w.check_params)
    verification = out * 1e-9 * (claim.correctness.trials * TRIAL_NS + ROUNDS * RECHECK_NS) + 0.2 * trials
    certain = claim.hardware.count == 1 and "cupy" not in backends and not graphs
    return ClaimCost(claim.id, round(startup, 1), round(verification, 1), MAX_TIME_S + WARMUP_S, certain)


def _compiles_graph(root: Path, impl: str) -> bool:
    """Whether a side's module calls `torch.compile` (parsed, not imported: no claim code runs here)."""
    module = root / impl.split(":", 1)[0]
    try:
        tree = ast.parse(module.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "compile"
               and isinstance(n.func.value, ast.Name) and n.func.value.id == "torch" for n in ast.walk(tree))


def order(paths: list[Path]) -> list[tuple[Path, ClaimCost]]:
    """Certain claims first, each group cheapest first (ties by id, so the order is stable)."""
    costed = [(p, cost(p)) for p in paths]
    return sorted(costed, key=lambda pc: (not pc[1].certain, pc[1].total_s, pc[1].claim))
