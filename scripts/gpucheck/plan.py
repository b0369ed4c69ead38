"""What a CUDA claim should cost on the H200, so the claims stage runs the cheapest and most certain
first and gives each a budget from its cost instead of an equal share. The estimate itself is the
runner's (`claimbench.spec.cost`: startup, verification from the output's elements, timing), taken
here at the window's short timing (MAX_TIME_S of rounds after WARMUP_S of warm-up).

"Most certain" is a claim on one GPU whose sides are torch or Triton and compile no graph: CuPy
compiles CUDA C at first call (nvcc in-process), `torch.compile` has never run in a confined side
on a GPU, and multi-rank claims need two GPUs, so those go last.
"""

from __future__ import annotations

from pathlib import Path

from claimbench.spec.cost import ClaimCost, estimate

MAX_TIME_S, WARMUP_S = 4.0, 1.0


def cost(path: Path) -> ClaimCost:
    """The estimate for the claim at ``path``, in the GPU window's timing."""
    from claimbench.spec.claim import Claim
    from claimbench.spec.yamlsafe import load_document

    claim = Claim.model_validate(load_document(path).data)
    return estimate(claim, path.parent.parent, max_time_s=MAX_TIME_S, warmup_s=WARMUP_S)


def order(paths: list[Path]) -> list[tuple[Path, ClaimCost]]:
    """Certain claims first, each group cheapest first (ties by id, so the order is stable)."""
    costed = [(p, cost(p)) for p in paths]
    return sorted(costed, key=lambda pc: (not pc[1].certain, pc[1].total_s, pc[1].claim))
