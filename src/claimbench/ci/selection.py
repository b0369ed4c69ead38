"""Which claims a CI run executes, and when it refuses: the CI options of `claimbench.options` at work.

- `--changed-since REF`: only claims whose claim file or imported project files changed.
- `--hardware-only`: only claims this machine can verify, with no CPU correctness fallback; if
  that leaves nothing, exit 1: a GPU runner that verified nothing has failed, not passed.
- `--require-gpu`: exit 1 at once when no CUDA GPU is detected (a mislabelled or broken runner).
- `--summary PATH`: append a Markdown table of the run (point it at `$GITHUB_STEP_SUMMARY`).
The checks trust what `detect` found on the machine, never the runner's label.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional

from claimbench.errors import UserError
from claimbench.options import CiChoices


def require_gpu(hw) -> None:
    if hw.device != "cuda" or not hw.gpus:
        raise UserError(f"--require-gpu: no usable CUDA GPU detected (found CPU {hw.cpu.model}); "
                        "a GPU runner without a GPU cannot verify anything")


def can_verify(path: Path, root: Path, hw) -> bool:
    """Does this machine match the claim's hardware? A claim that does not parse is kept (fail closed)."""
    from claimbench.machine.hardware import matches
    from claimbench.spec.claim import Claim
    from claimbench.spec.yamlsafe import load_document

    try:
        claim = Claim.model_validate(load_document(path).data)
    except Exception:
        return True
    return matches(claim.hardware, hw)[0]


def select(paths: Iterable[Path], root: Path, hw, *, changed_since: Optional[str] = None,
           hardware_only: bool = False, gpu_required: bool = False) -> list[Path]:
    """The claims a CI run should execute, in the given order; raises UserError (exit 1) to refuse."""
    if gpu_required:
        require_gpu(hw)
    paths = [Path(p) for p in paths]
    if changed_since:
        from claimbench.ci.changed import changed_claims
        paths = changed_claims(root, paths, changed_since)
    if hardware_only:
        before = len(paths)
        paths = [p for p in paths if can_verify(p, root, hw)]
        if not paths:
            scope = f"of the {before} claim(s) changed since {changed_since}" if changed_since else f"of the {before} claim(s)"
            raise UserError(f"--hardware-only: none {scope} can be verified on this machine ({hw.name}); "
                            "a runner that verifies nothing has failed")
    return paths


def select_for_ci(choices: CiChoices, paths: list[Path], root: Path, *, hw, hardware_only: bool = False) -> list[Path]:
    """`claimbench run`'s hook: apply --require-gpu, --changed-since and --hardware-only (the run
    option, `RunOptions.hardware_only`, which also keeps the runner from a CPU fallback)."""
    return select(paths, root, hw, changed_since=choices.changed_since, hardware_only=hardware_only,
                  gpu_required=choices.require_gpu)
