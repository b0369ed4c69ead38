"""The policy gate: is this claim admissible? Schema, source policy, identity, paths, tolerances.

Nothing here imports torch, triton, cupy or a kernel module; kernel files are read with ``ast``.
Every problem is located (file, line, key) and says how to fix it.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from pydantic import BaseModel, ValidationError

from claimbench.gate.facts import facts
from claimbench.gate.rules import check_kernel_source
from claimbench.gate.srcgraph import impl_refs, resolved, split_ref, task_side_rule
from claimbench.spec import expr, memory, safetext
from claimbench.spec.claim import POLICY_FIELDS, Claim
from claimbench.spec.problem import Problem
from claimbench.spec.yamlsafe import Document, YamlRejected, dotted, load_document
from claimbench.stats.precision import default_halfwidth

TOLERANCE_CEILINGS = {
    "float64": 1e-10, "float32": 1e-5, "tf32": 1e-3, "float16": 1e-3, "bfloat16": 1.5e-2,
    "float8_e4m3fn": 1e-1, "float8_e5m2": 1e-1, "int8": 1.5e-2, "uint8": 1.5e-2, "int4": 1.5e-2,
    "int32": 0.0, "int64": 0.0,
}
MAX_TOLERANCE = 0.5  # claimed.tolerance: above it, a half-size measurement reproduces the claim
LOW_SPEEDUP = 0.1    # a speedup threshold below it is met by a kernel 10x slower than its baseline: noted
REQUIRED_BLOCKS = ("source", "claimed") + POLICY_FIELDS
VENDOR_WORDS = ("datasheet", "data-sheet", "data sheet", "peak", "spec sheet", "spec-sheet",
                "marketing", "vendor", "brochure", "product brief")


@dataclass(frozen=True)
class CheckResult:
    """One claim file's verdict from the gate."""

    path: str
    claim: Optional[Claim]
    problems: tuple[Problem, ...] = field(default_factory=tuple)
    notes: tuple[Problem, ...] = field(default_factory=tuple)  # allowed, but shown: loosened bounds and why

    @property
    def ok(self) -> bool:
        return self.claim is not None and not self.problems


def gate_file(path: Path, root: Path, listing=None) -> CheckResult:
    """Check one claim file; ``listing`` (a parsed LIST.md) enables the entry check."""
    shown = _shown(path, root)
    try:
        doc = load_document(path, display=shown)
    except YamlRejected as e:
        return CheckResult(shown, None, (e.problem,))
    problems = _structure(doc)
    if problems:
        return CheckResult(shown, None, tuple(problems + _unsafe_text(doc)))
    try:
        claim = Claim.model_validate(doc.data)
    except ValidationError as e:
        return CheckResult(shown, None, tuple(_from_pydantic(e, doc)))
    problems = _unsafe_text(doc) + semantic(claim, doc, path, root=root, listing=listing)
    return CheckResult(shown, claim, tuple(problems), _precision_notes(claim, doc) + _low_speedup_note(claim, doc))


def _shown(path: Path, root: Path) -> str:
    try:
        return str(resolved(path).relative_to(resolved(root)))
    except ValueError:
        return str(path)


def _structure(doc: Document) -> list[Problem]:
    out = []
    for key in REQUIRED_BLOCKS:
        value = doc.data.get(key)
        if value is None or value == {} or value == [] or value == "":
            why = ("the reading list omits any number without its hardware, workload, precision, "
                   "baseline and correctness method" if key in POLICY_FIELDS else
                   "a number needs its source" if key == "source" else "a claim states the number it claims")
            state = "is empty" if key in doc.data else "is missing"
            out.append(Problem(doc.path, doc.line_of((key,)), key,
                               f"`{key}` {state}: {why}, so this number would be omitted; add a `{key}:` block (see README, 'The claim format')"))
    if out:  # a misspelt block reads as a missing one; name the typo too, since pydantic never runs
        known = list(Claim.model_fields)
        for key in doc.data:
            if str(key) not in known:
                near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
                hint = f"; did you mean `{near[0]}`?" if near else f"; known keys: {', '.join(known)}"
                out.append(Problem(doc.path, doc.line_of((key,)), str(key), f"unknown key{hint}"))
    return out


def _unsafe_text(doc: Document) -> list[Problem]:
    """Text that would render differently from what its author sees (controls, bidi, zero-width):
    refused here, with its key and line, rather than escaped silently on the list."""
    out = []
    stack: list[tuple[tuple, Any]] = [((), doc.data)]
    while stack:
        kp, value = stack.pop()
        if isinstance(value, dict):
            for k, v in value.items():
                why = safetext.problem(str(k))
                if why:
                    out.append(Problem(doc.path, doc.line_of(kp + (k,)), safetext.plain(dotted(kp) or "claim"), f"key {why}"))
                stack.append((kp + (k,), v))
        elif isinstance(value, list):
            stack.extend((kp + (i,), v) for i, v in enumerate(value))
        elif isinstance(value, str):
            why = safetext.problem(value)
            if why:
                out.append(Problem(doc.path, doc.line_of(kp), safetext.plain(dotted(kp)), why))  # a key may hold anything
    return sorted(out, key=lambda p: p.line)


def _model_at(loc: tuple) -> type[BaseModel] | None:
    model: Any = Claim
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return None
        ann = fields[part].annotation
        model = next((a for a in getattr(ann, "__args__", ()) if hasattr(a, "model_fields")), ann)
    return model if hasattr(model, "model_fields") else None


def _from_pydantic(err: ValidationError, doc: Document) -> list[Problem]:
    out = []
    for e in err.errors():
        loc = tuple(x for x in e["loc"] if not (isinstance(x, str) and ("[" in x or x.startswith("function-"))))
        key = dotted(loc) or "claim"
        line = doc.line_of(loc)
        if e["type"] == "extra_forbidden":
            parent = _model_at(loc[:-1]) if loc else None
            known = list(parent.model_fields) if parent else []
            near = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6) if loc else []
            hint = f"; did you mean `{near[0]}`?" if near else (f"; known keys: {', '.join(known)}" if known else "")
            out.append(Problem(doc.path, line, key, f"unknown key{hint}"))
            continue
        msg = e["msg"]
        if e["type"] == "missing":
            msg = "is required; add it (see README, 'The claim format')"
        elif e["type"] in ("finite_number",):
            msg = "must be a finite number (not NaN or infinity)"
        elif e["type"] == "literal_error":
            msg = f"{msg}; got {e.get('input')!r}"
            if loc == ("source", "kind") and any(w in str(e.get("input", "")).lower() for w in VENDOR_WORDS):
                msg = ("vendor datasheets and peak numbers are not performance measurements; cite the paper, "
                       "specification, documentation, repository or implementer report the number comes from")
        elif e["type"].endswith("_type") and "input" in e:
            msg = f"{msg}; got {type(e['input']).__name__} {e['input']!r}"
        out.append(Problem(doc.path, line, key, msg))
    return out


def semantic(claim: Claim, doc: Document, path: Path, *, root: Path, listing) -> list[Problem]:
    """Rules the schema cannot state: identity, source policy, paths, expressions, tolerances."""
    out: list[Problem] = []
    at = doc.line_of

    def add(keypath: tuple, msg: str) -> None:
        out.append(Problem(doc.path, at(keypath), dotted(keypath), msg))

    if Path(path).stem != claim.id:
        add(("id",), f"`{claim.id}` does not match the file name `{Path(path).name}`; rename one so they agree")
    src = claim.source
    blob = f"{src.title} {src.url} {src.locator}".lower()
    if any(w in blob for w in ("datasheet", "data sheet", "spec sheet", "product brief")):
        add(("source",), "vendor datasheets and peak numbers are not performance measurements; cite a measurement")
    if listing is not None:
        _entry(claim, listing, add)
    kernels = resolved(root / "kernels")
    refs_ok = True
    for key, ref in impl_refs(claim):
        keypath = tuple(key.split("."))
        refs_ok &= _ref(ref, root, kernels, keypath=keypath, add=add)
    _names(claim, add)
    _expressions(claim, add)
    _tolerances(claim, add)
    _claimed(claim, add)
    _precision(claim, add)
    if claim.hardware.device == "cuda" and not claim.workload.bytes:
        add(("workload", "bytes"), "a cuda claim needs `workload.bytes` (the fewest bytes that must move): the physics floor is computed from it")
    _memory(claim, add)
    if claim.hardware.device == "cpu" and claim.kernel.backend == "cupy":
        add(("kernel", "backend"), "cupy needs a cuda device; use device: cuda or another backend")
    if refs_ok:
        out.extend(check_kernel_source(root, claim, doc.path))
        task_side_rule(root, claim, add)
    return out


# What the list writes between a number's parts, or reads as a link: a side's name holding one could
# make its line show a second number or link (an adversarial review, 2026-12-06)
# (links, brackets, pipes and autolinks are escaped where the name is written: `safetext.markdown`)
_LIST_SYNTAX = ("·", "×")  # the list's own separator and the speedup sign (shipped names use `;`)


def _names(claim: Claim, add) -> None:
    for side in ("kernel", "baseline"):
        name = getattr(claim, side).name
        found = [t for t in _LIST_SYNTAX if t in name]
        if found and not safetext.problem(name):  # text that is refused already says so once
            add((side, "name"), f"holds {found[0]!r}, which the list writes between a number's parts or reads as a "
                                "link; a name is plain words (e.g. `torch.softmax, eager`)")


def _entry(claim: Claim, listing, add) -> None:
    try:
        listing.find(claim.entry)
    except Exception as e:  # EntryNotFound / AmbiguousEntry from listing
        sugg = list(getattr(e, "suggestions", []) or getattr(e, "candidates", []) or [])
        hint = f"; nearest: {', '.join(repr(s) for s in sugg[:3])}" if sugg else ""
        kind = "is ambiguous" if "mbiguous" in type(e).__name__ else f"names no entry of {getattr(listing, 'path', 'LIST.md')}"
        add(("entry",), f"`{claim.entry}` {kind}{hint}; write the entry's name, or `Section > Name`")


def _ref(ref: str, root: Path, kernels: Path, *, keypath: tuple, add) -> bool:
    file, func = split_ref(ref)
    p = root / file
    if Path(file).is_absolute() or ".." in Path(file).parts:
        add(keypath, f"`{file}` must be a path inside kernels/, relative to the project root")
        return False
    if not p.is_file():
        add(keypath, f"`{file}` does not exist; paths are relative to the project root ({root})")
        return False
    real = resolved(p)
    if not real.is_relative_to(kernels):
        add(keypath, f"`{file}` resolves outside kernels/ ({real}); kernel code lives under kernels/")
        return False
    try:
        top = facts(real).top_names
    except SyntaxError as e:
        add(keypath, f"`{file}` does not parse: line {e.lineno}: {e.msg}")
        return False
    except (UnicodeDecodeError, OSError) as e:
        add(keypath, f"`{file}` cannot be read: {e}")
        return False
    if func not in top:
        near = difflib.get_close_matches(func, sorted(top), n=1)
        hint = f"; did you mean `{near[0]}`?" if near else ""
        add(keypath, f"`{func}` is not defined at the top level of `{file}`{hint}")
        return False
    return True


def _expressions(claim: Claim, add) -> None:
    for name in ("flops", "bytes"):
        text = getattr(claim.workload, name)
        if text is None:
            continue
        w = claim.workload
        shapes = [("", w.params)] + [(f" for check_params[{i}]", {**w.params, **c}) for i, c in enumerate(w.check_params)]
        shapes += [(f" for the sweep point {v!r}", w.at(v).params) for v in w.off_points()]
        for where, params in shapes:
            try:
                value = expr.evaluate(text, params)
            except expr.ExprError as e:
                add(("workload", name), f"{e}; write arithmetic over params names and numbers only")
                break
            if value <= 0:
                add(("workload", name), f"evaluates to {value:g}{where}; it must be positive")
                break


def _memory(claim: Claim, add) -> None:
    """A GPU claim states what its verification holds, and it must fit before a GPU window is spent on it."""
    mem = claim.workload.memory
    if mem is None:
        if claim.hardware.device == "cuda":
            add(("workload", "memory"), "a cuda claim needs `workload.memory` (operands_bytes, output_elements, "
                "reference_bytes): `check` estimates its verification's peak memory from it and refuses a claim that "
                "cannot fit (docs/verification.md)")
        return
    w = claim.workload
    points = [w.params] + [{**w.params, **c} for c in w.check_params] + [w.at(v).params for v in w.off_points()]
    for key, text in mem:
        for params in ([] if text is None else points):
            try:
                value = expr.evaluate(text, {**params, memory.ITEMSIZE: 1})
            except expr.ExprError as e:
                add(("workload", "memory", key), f"{e}; write arithmetic over params names, `itemsize` and numbers")
                return
            if value < 0 or (value == 0 and key in ("operands_bytes", "output_elements")):
                add(("workload", "memory", key), f"evaluates to {value:g} at {params}; it must be positive")
                return
    for o in memory.over_bound(claim):
        add(("workload", "memory", o.key), o.message)


def _tolerances(claim: Claim, add) -> None:
    c = claim.correctness
    if c.method != "allclose" or c.tolerance_reason:
        return
    ceiling = TOLERANCE_CEILINGS.get(claim.precision.dtype, 1e-1)
    for key in ("max_rel_l2", "rtol"):
        v = getattr(c, key)
        if v is not None and v > ceiling:
            add(("correctness", key), f"{v:g} is looser than {claim.precision.dtype} justifies (ceiling {ceiling:g}); "
                "tighten it, or explain why in `correctness.tolerance_reason`")


def _claimed(claim: Claim, add) -> None:
    """A claim must promise what it names: measured at its threshold, it still says its number."""
    c = claim.claimed
    if c.tolerance > MAX_TOLERANCE:
        add(("claimed", "tolerance"), f"{c.tolerance:g} lets a measurement of {1 - c.tolerance:.0%} of the claimed "
            f"value reproduce it, which promises little; narrow it to {MAX_TOLERANCE:g} or less, or claim the "
            "value you measure")
    elif c.metric == "speedup" and c.value > 1 and c.value * (1 - c.tolerance) <= 1:
        add(("claimed", "tolerance"), f"a speedup of {c.value:g} with tolerance {c.tolerance:g} is reproduced by "
            f"{c.value * (1 - c.tolerance):.4g}, which is not above 1: a kernel no faster than its baseline would "
            f"verify it; narrow the tolerance below {1 - 1 / c.value:.3g}, or claim parity with a value of 1 or less")


def _precision(claim: Claim, add) -> None:
    c = claim.claimed
    default = default_halfwidth(claim.hardware.device)
    if c.max_ci_halfwidth is not None and c.max_ci_halfwidth > default and not c.precision_reason:
        add(("claimed", "max_ci_halfwidth"), f"{c.max_ci_halfwidth:g} is looser than the {claim.hardware.device} default "
            f"{default:g}; tighten it, or explain why in `claimed.precision_reason`")


def _precision_notes(claim: Claim, doc: Document) -> tuple[Problem, ...]:
    """A loosened CI bound passes the gate with its reason, which `check` prints for a reviewer."""
    c = claim.claimed
    default = default_halfwidth(claim.hardware.device)
    if c.max_ci_halfwidth is None or c.max_ci_halfwidth <= default or not c.precision_reason:
        return ()
    reason = " ".join("".join(ch if ch.isprintable() else " " for ch in c.precision_reason).split())
    return (Problem(doc.path, doc.line_of(("claimed", "precision_reason")), "claimed.precision_reason",
                    f"loosened: max_ci_halfwidth {c.max_ci_halfwidth:g} (the {claim.hardware.device} default is "
                    f"{default:g}), because: {reason}"),)


def _low_speedup_note(claim: Claim, doc: Document) -> tuple[Problem, ...]:
    """A speedup threshold far below 1 is allowed (a fixture that any correct kernel clears, a
    kernel claimed at a fraction of a tuned library's rate) but promises little, so `check` says so."""
    c = claim.claimed
    low = c.value * (1 - c.tolerance)
    if c.metric != "speedup" or low >= LOW_SPEEDUP:
        return ()
    return (Problem(doc.path, doc.line_of(("claimed", "value")), "claimed.value",
                    f"speedup {c.value:g} is verified by a kernel {1 / low:.3g}x slower than its baseline "
                    f"(threshold {low:.4g}): it promises little; claim the value you measure if you meant more"),)
