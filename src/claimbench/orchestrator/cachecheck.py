"""Whether a run's sides could edit each other's compiled code, and whether its claim gives them any.

Inductor, Triton and torch's C++ extensions keep compiled code in cache folders on disk, keyed by
what was compiled, and load what they find there. Where each side is confined to a folder of its
own (Landlock: `ForkServer.scratch_for`; inside bubblewrap, `ForkServer.landlock_inside`), each role
has caches of its own. Without Landlock (no sandbox, or bubblewrap on a kernel before 5.13) the
three sides of a claim share them, so a kernel can compile its baseline at the claim's shapes and
edit the generated code the baseline then loads (1.76x for a kernel at 0.55x, an adversarial
review: docs/threats.md), or the reference's the same way. Such a run keeps its number off the list
when the baseline's or the task's code compiles anything: a blocker naming the file. The check is
a text search of every project file those sides import, so it errs towards blocking (a mention in
a comment counts): a false blocker costs a rerun where Landlock is, a missed one a false number.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from claimbench.gate.srcgraph import closure, split_ref
from claimbench.machine import landlock
from claimbench.spec.bounded import UnreadableFile, read_text
from claimbench.spec.claim import Claim

# What compiles into an on-disk cache a side then loads (Triton: its JIT's kernel cache, on a GPU only:
# every side of a claim run on a CPU interprets Triton, `backends.child_env`, and compiles nothing)
MARKERS = ("torch.compile", "flex_attention", "triton", "_inductor", "load_inline", "cpp_extension")
GPU_ONLY = frozenset({"triton"})


def roles_isolated(kind: str) -> bool:
    """Whether each side of a claim run in sandbox ``kind`` has its compiler caches to itself."""
    if kind == "landlock":
        return True
    return kind == "bwrap" and landlock.abi() >= 1


def compiling_rival(root: Path, claim: Claim, *, device: str) -> Optional[str]:
    """"<file>: <marker>" for the first project file the baseline's or the task's side imports that
    names a way to compile on ``device``, or None."""
    markers = [m for m in MARKERS if device != "cpu" or m not in GPU_ONLY]
    refs = [claim.baseline.impl, claim.baseline.prepare, claim.workload.inputs]
    if claim.correctness.reference != "baseline-float64":
        refs.append(claim.correctness.reference)
    base = Path(root).resolve()
    files = closure(base, {base / split_ref(ref)[0] for ref in refs if ref})
    for path in sorted(files):
        try:
            text = read_text(path, what="source")
        except UnreadableFile:
            return f"{path.name}: unreadable"  # unread is never harmless
        found = next((m for m in markers if m in text), None)
        if found:
            return f"{path.relative_to(base) if path.is_relative_to(base) else path}: {found}"
    return None


def shared_cache_blocker(kind: str, root: Path, claim: Claim, *, device: str) -> str:
    """Why a run on ``device`` in sandbox ``kind`` cannot verify this claim for shared compiler caches;
    "" when it can."""
    if roles_isolated(kind):
        return ""
    hit = compiling_rival(root, claim, device=device)
    if hit is None:
        return ""
    return (f"the claim's sides shared their compiler caches (sandbox {kind}, no Landlock to give each side its "
            f"own) and the baseline's or the task's code compiles ({hit}): the kernel could have edited the code "
            "they loaded; measure where Landlock confines each side (Linux 5.13 or later)")
