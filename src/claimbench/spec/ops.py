"""Which ops a forbidden name stands for, shared by the static rule, the dispatch trace and the
tripwire, so that the three agree on what "forbidden" means.

A claim names an op the way its author thinks of it (`torch.softmax`); the kernel can reach the
same computation under other spellings: the `torch.special`, `torch.nn.functional` and `Tensor`
aliases, `torch.ops.aten.<op>.<overload>`, or the backend op the composite one decomposes into
(`softmax` runs `_softmax`; `matmul` runs `mm`, `bmm` or `addmm`). Matching by spelling alone let
`torch.special.softmax` past a rule forbidding `torch.softmax` (issue 22), so a name stands for its
group: the op's own name, its underscore and `special_` forms, and the aten ops it decomposes into.
Pure data: no torch import, so `check` stays fast.
"""

from __future__ import annotations

GROUPS: dict[str, frozenset[str]] = {
    "matmul": frozenset({"mm", "bmm", "addmm", "matmul", "baddbmm", "addbmm", "_addmm_activation", "linear",
                         "dot", "mv", "addmv", "einsum", "tensordot", "inner", "chain_matmul", "multi_dot"}),
    "mm": frozenset({"mm", "addmm", "matmul"}),
    "bmm": frozenset({"bmm", "baddbmm", "matmul"}),
    "linear": frozenset({"linear", "addmm", "mm", "matmul", "_addmm_activation"}),
    "scaled_dot_product_attention": frozenset({
        "scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention", "_scaled_dot_product_attention_math",
        "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_cudnn_attention",
        "_scaled_dot_product_fused_attention_overrideable", "_fused_sdp_choice"}),
    "softmax": frozenset({"softmax", "_softmax", "_safe_softmax", "special_softmax"}),
    "log_softmax": frozenset({"log_softmax", "_log_softmax", "special_log_softmax"}),
    "cumsum": frozenset({"cumsum", "_cumsum"}),
    "sum": frozenset({"sum"}),
    "clone": frozenset({"clone"}),
}


def op_name(dotted: str) -> str:
    """The op a dotted name calls: `torch.ops.aten._softmax.default` -> `_softmax`,
    `torch.special.softmax` -> `softmax`, `x.softmax` -> `softmax`."""
    parts = dotted.split(".")
    if "aten" in parts[:-1]:
        return parts[parts.index("aten") + 1]
    return parts[-1]


def group(name: str) -> frozenset[str]:
    """The aten op names a forbidden name (dotted or bare) stands for."""
    last = op_name(name)
    base = last.removeprefix("special_").lstrip("_")
    return GROUPS.get(base, frozenset({last, base, "_" + base, "special_" + base}))


def same_op(name: str, forbidden: str) -> bool:
    """``name`` reaches what ``forbidden`` names: its op is in the forbidden name's group."""
    last = op_name(name)
    return last in group(forbidden) or last.removeprefix("special_") in group(forbidden)


# Ops the harness itself runs in the kernel's process (mapping operands, staging copies, re-deriving
# prepared operands, the batch-invariance variants): they cannot carry a tripwire, so a claim that
# forbids one of them is guarded by the rule and the trace alone.
HARNESS_OPS = frozenset({"copy_", "empty", "empty_like", "empty_strided", "_to_copy", "to", "fill_", "zero_",
                         "roll", "arange", "contiguous", "clone", "index", "index_put_", "view", "as_strided",
                         "set_", "select", "slice", "_local_scalar_dense", "ones", "add", "detach", "alias"})
TRIPWIRE_EXIT_BASE = 150   # a tripped side exits with BASE + the op's index in `tripwire_ops`
TRIPWIRE_MAX_OPS = 100     # exit statuses stop at 255


def tripwire_ops(forbidden: list[str]) -> list[str]:
    """The aten ops the kernel's process carries a tripwire on, in a fixed order: the side exits
    with `TRIPWIRE_EXIT_BASE + i` when op ``i`` runs, and the orchestrator names the op from the
    status alone, so the finding never passes through anything the kernel's process writes."""
    return sorted({op for n in forbidden for op in group(n)} - HARNESS_OPS)[:TRIPWIRE_MAX_OPS]


def tripped(forbidden: list[str], exit_code: int) -> str | None:
    """The op a side's exit status names, or None."""
    i = exit_code - TRIPWIRE_EXIT_BASE
    names = tripwire_ops(forbidden)
    return names[i] if 0 <= i < len(names) else None
