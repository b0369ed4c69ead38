"""The peak memory a claim's verification holds, estimated from its `workload.memory` before
anything runs: a claim that cannot fit is refused by `check`, naming its largest term, instead
of dying out of memory in the middle of a GPU window.

The model is the harness's own layout, term by term (docs/verification.md has the derivation):
on the claim's device, the task side keeps an input set and clones it for the reference, which
adds its declared working set and its float64 output; the kernel and baseline sides each hold
their operands and outputs, plus what `prepare` and their working set add. On the host, the
orchestrator owns one page set of operands per side, the reference crosses as float64 (staged by
the task side, then copied into the orchestrator's pages), each side's output is staged and read,
and the comparison and null models work in blocks (at most a quarter of the float64 output, by
`benchmarks/verify_scale.py`). A cpu claim's device is the host, so all of it counts there. The
estimate errs high: every term is taken at its peak, as if all peaks were at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Optional

from claimbench.spec import expr
from claimbench.spec.claim import Claim, Memory, Scalar

GiB = 1 << 30
# An H100 has 80 GB (74.5 GiB), the smallest device a shipped GPU claim names; the rest is for
# three CUDA contexts, the caching allocator's slack and fragmentation.
DEVICE_BOUND_BYTES = 60 * GiB
# A small CI runner or a workstation: the H200 machines have 128 GiB, the 2-core CI machine 24.
HOST_BOUND_BYTES = 16 * GiB
COMPARE_BYTES_PER_ELEMENT = 2  # the blocked comparison and null models: 0.13x the float64 output, measured
ITEMSIZE = "itemsize"  # the name an expression may use: bytes per element at the dtype the run uses
# bytes per element of each claim dtype (int4 is stored packed in bytes by the shipped kernels)
ITEMSIZES = {"float64": 8, "int64": 8, "float32": 4, "tf32": 4, "int32": 4, "float16": 2, "bfloat16": 2,
             "float8_e4m3fn": 1, "float8_e5m2": 1, "int8": 1, "uint8": 1, "int4": 1}


@dataclass(frozen=True)
class Term:
    """One thing verification holds, in bytes, and where."""

    name: str
    key: str  # the `workload.memory` key it comes from
    bytes: int
    on_device: bool


@dataclass(frozen=True)
class MemoryEstimate:
    """The estimated peak on host and device at one point of the claim, term by term."""

    point: str  # "params", or the sweep value it was estimated at
    terms: tuple[Term, ...]
    device_is_host: bool

    @property
    def device_bytes(self) -> int:
        return 0 if self.device_is_host else sum(t.bytes for t in self.terms if t.on_device)

    @property
    def host_bytes(self) -> int:
        return sum(t.bytes for t in self.terms if self.device_is_host or not t.on_device)

    def largest(self, *, on_device: bool) -> Term:
        """The term to shrink first on one side of the bus."""
        pool = [t for t in self.terms if self.device_is_host or t.on_device == on_device]
        return max(pool, key=lambda t: t.bytes)

    def summary(self) -> str:
        """One line for `show`: both peaks, and the largest term on each."""
        host = f"host {gib(self.host_bytes)} (largest: {self.largest(on_device=False).name})"
        if self.device_is_host:
            return f"{host}, the device is the host; bound {gib(HOST_BOUND_BYTES)}"
        device = f"device {gib(self.device_bytes)} (largest: {self.largest(on_device=True).name})"
        return f"{device}, {host}; bounds {gib(DEVICE_BOUND_BYTES)} and {gib(HOST_BOUND_BYTES)}"


@dataclass(frozen=True)
class OverBound:
    """Verification would not fit on one side of the bus: the key to change and what to say."""

    key: str
    message: str


def gib(n: int) -> str:
    return f"{n / GiB:.2f} GiB"


def _output_itemsize(claim: Claim) -> int:
    return max(4, ITEMSIZES.get(claim.precision.dtype, 4))  # errs high: a bf16 output counted as float32


def _count(mem: Memory, key: str, names: Mapping[str, Scalar]) -> int:
    text = getattr(mem, key)
    return int(expr.evaluate(text, names)) if text else 0


def estimate_at(claim: Claim, params: Mapping[str, Scalar], *, point: str = "params") -> Optional[MemoryEstimate]:
    """The estimate at ``params``, or None when the claim declares no `workload.memory`.
    Raises ``expr.ExprError`` for an expression that does not evaluate (the gate reports it)."""
    mem = claim.workload.memory
    if mem is None:
        return None
    names = {**params, ITEMSIZE: ITEMSIZES.get(claim.precision.dtype, 4)}
    ops, out, ref, sides = (_count(mem, k, names) for k in ("operands_bytes", "output_elements", "reference_bytes", "sides_bytes"))
    s = _output_itemsize(claim)
    per_host = claim.hardware.count // claim.hardware.nodes  # ranks sharing one machine's memory
    terms = (
        Term("the task side's input set and the reference's copy", "operands_bytes", 2 * ops, True),
        Term("the reference's working set", "reference_bytes", ref, True),
        Term("the float64 reference", "output_elements", 8 * out, True),
        Term("the kernel's and the baseline's operands", "operands_bytes", 2 * ops, True),
        Term("the kernel's and the baseline's outputs", "output_elements", 2 * s * out, True),
        Term("the sides' prepare products and working set", "sides_bytes", sides, True),
        Term("the orchestrator's operand pages, one set per side", "operands_bytes", per_host * 2 * ops, False),
        Term("the float64 reference, staged and copied to the orchestrator", "output_elements", per_host * 16 * out, False),
        Term("both outputs, staged and read", "output_elements", per_host * 4 * s * out, False),
        Term("the comparison's and null models' blocks", "output_elements", per_host * COMPARE_BYTES_PER_ELEMENT * out, False),
    )
    return MemoryEstimate(point, terms, device_is_host=claim.hardware.device == "cpu")


def estimates(claim: Claim) -> list[MemoryEstimate]:
    """The estimate at the claim's own point and at each sweep point (each is measured)."""
    w = claim.workload
    out = [estimate_at(claim, w.params)]
    out += [estimate_at(claim, w.at(v).params, point=f"sweep point {v!r}") for v in w.off_points()]
    return [e for e in out if e is not None]


def over_bound(claim: Claim) -> list[OverBound]:
    """Why the claim's verification would not fit, one per bound it exceeds (at the worst point),
    naming the largest term and how to shrink it; empty when it fits."""
    found = estimates(claim)
    if not found:
        return []
    problems = []
    sides = [(False, HOST_BOUND_BYTES, "host")]
    if not found[0].device_is_host:
        sides.insert(0, (True, DEVICE_BOUND_BYTES, "device"))
    for on_device, bound, where in sides:
        worst = max(found, key=lambda e: e.device_bytes if on_device else e.host_bytes)
        peak = worst.device_bytes if on_device else worst.host_bytes
        if peak <= bound:
            continue
        big = worst.largest(on_device=on_device)
        fix = ("compute the reference in chunks (kernels/attention/task.py:attention_fp64 is one way) and "
               "declare the chunk" if big.key == "reference_bytes" else "shrink `params`")
        problems.append(OverBound(big.key, f"verification would hold about {gib(peak)} on the {where} at {worst.point}, "
                                  f"above the {gib(bound)} bound; the largest term is {big.name}, {gib(big.bytes)}: {fix}"))
    return problems


def declared_mismatch(claim: Claim, params: Mapping[str, Scalar], *, dtype: str, operand_bytes: int,
                      output_elements: int) -> Optional[str]:
    """Why the claim's declared input bytes or output elements are not what one trial's inputs and
    reference hold (at ``params``, run at ``dtype``), or None when both agree or none is declared."""
    mem = claim.workload.memory
    if mem is None:
        return None
    names = {**params, ITEMSIZE: ITEMSIZES.get(dtype, 4)}
    for key, seen, what in (("operands_bytes", operand_bytes, "the input set holds"),
                            ("output_elements", output_elements, "the reference has")):
        try:
            said = _count(mem, key, names)
        except expr.ExprError as e:
            return f"workload.memory.{key} does not evaluate at {dict(params)}: {e}"
        if said != seen:
            return (f"workload.memory.{key} gives {said} at {dict(params)} ({dtype}), but {what} {seen}; "
                    f"fix the expression so `check` estimates the claim's memory from the real sizes")
    return None
