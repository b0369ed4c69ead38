"""The claim: one YAML file stating one kernel against one baseline on one workload.

These models are the contract between contributors and the runner. They are pure data: no
torch, no kernel import, so ``claimbench check`` stays fast and runs anywhere.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from claimbench.spec.draft07 import draft07_schema

DTYPES = (
    "float64", "float32", "tf32", "float16", "bfloat16",
    "float8_e4m3fn", "float8_e5m2", "int8", "uint8", "int4", "int32", "int64",
)
SOURCE_KINDS = ("paper", "specification", "documentation", "repository", "implementer-report")
METRICS = ("speedup", "time_us", "tflops", "gbps", "sol_fraction")
BACKENDS = ("torch", "triton", "cupy", "cpu")
PROPERTIES = ("deterministic", "batch-invariant")
MIN_SWEEP_POINTS, MAX_SWEEP_POINTS = 2, 8  # a sweep is a figure, not a search: each point is a whole measurement
IMPL_RE = r"^[A-Za-z0-9_./-]+\.py:[A-Za-z_][A-Za-z0-9_]*$"

Dtype = Literal[DTYPES]  # type: ignore[valid-type]
NonNeg = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Text = Annotated[str, Field(min_length=1)]
ImplRef = Annotated[str, Field(pattern=IMPL_RE, description="`path/to/file.py:function`, relative to the project root")]
Scalar = Union[bool, int, float, str]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class Source(_Model):
    """Where the mechanism or number comes from; the list's source policy decides what is admitted."""

    kind: Literal[SOURCE_KINDS] = Field(  # type: ignore[valid-type]
        description="paper | specification | documentation | repository | implementer-report. "
        "Vendor datasheets and peak numbers are not measurements and are refused.")
    title: Text = Field(description="The source's own title.")
    url: Text = Field(description="An http(s) link to the source.")
    locator: Text = Field(description="Where in the source the number or mechanism stands: section, figure, table.")

    @field_validator("url")
    @classmethod
    def _http(cls, v: str) -> str:
        if not re.match(r"^https?://[^\s/]+\.[^\s]+$", v):
            raise ValueError("must be an http(s) URL with a host, e.g. https://arxiv.org/abs/1805.02867")
        return v


class HardwareSpec(_Model):
    """The hardware a number is valid on; a claim that does not match the machine is skipped."""

    device: Literal["cuda", "cpu"] = Field(description="cuda | cpu")
    model: list[Text] = Field(min_length=1, description="Globs matched against the detected device name, e.g. `NVIDIA H100*`; `*` for any.")
    compute_capability: Optional[list[Annotated[str, Field(pattern=r"^\d+\.\d+$")]]] = Field(
        None, description="cuda only, optional: exact compute capabilities, as quoted strings like \"9.0\".")
    sm_count: Optional[Annotated[int, Field(ge=1)]] = Field(None, description="Optional: exact SM count, for wave-sensitive claims.")
    nvlink: Optional[bool] = Field(
        None, description="cuda only, optional: `true` when the number rests on NVLink between the claim's GPUs "
        "(a multi-GPU claim): each GPU it uses must report an active NVLink; a PCIe-only or unknown link does not match.")
    count: Annotated[int, Field(ge=1, le=64)] = Field(
        1, description="Optional: ranks in all (one device each); above 1 the runner launches them through torchrun.")
    nodes: Annotated[int, Field(ge=1, le=64)] = Field(
        1, description="Optional: machines the ranks span (count divides evenly over them); each runs "
        "`claimbench run --node-rank K --master-addr HOST --master-port PORT`.")

    @model_validator(mode="after")
    def _cc_cuda_only(self) -> "HardwareSpec":
        if self.device == "cpu" and (self.compute_capability or self.sm_count or self.nvlink is not None):
            raise ValueError("compute_capability, sm_count and nvlink apply to cuda claims only")
        if self.count % self.nodes:
            raise ValueError(f"count {self.count} does not divide evenly over {self.nodes} nodes")
        return self


class Memory(_Model):
    """What verification holds at the claim's size, as arithmetic over `params` (and `itemsize`, the
    bytes of one element at the dtype the run uses): enough for `check` to estimate the peak on host
    and device before anything runs. The first two are measured in every correctness trial, and a
    claim whose declaration disagrees with its own inputs and reference is rejected there
    (docs/verification.md)."""

    operands_bytes: Text = Field(description="Bytes of one input set as `inputs` makes it; write the floating-point "
                                 "tensors' bytes with `itemsize` so the expression holds at `check_dtype` too.")
    output_elements: Text = Field(description="Elements of the kernel's outputs (the reference's, in float64).")
    reference_bytes: Text = Field(
        description="Bytes the reference holds at its peak beyond its inputs and its float64 output (its chunks and "
        "temporaries), on the claim's device.")
    sides_bytes: Optional[Text] = Field(
        None, description="Optional: bytes the larger of the kernel's and the baseline's `prepare` products and working "
        "set add on the device beyond their operands and outputs (a dense mask, an expanded cache, a score matrix).")


class Workload(_Model):
    """The inputs, their sizes, and the work they imply."""

    inputs: ImplRef = Field(description="`make_inputs(*, seed, device, dtype, **params)` returning a tuple of tensors.")
    params: dict[str, Scalar] = Field(description="Keyword arguments for `inputs` at the measured size.")
    check_params: list[dict[str, Scalar]] = Field(
        default_factory=list, description="Optional: extra (small, awkward) shapes, checked for correctness only.")
    flops: Optional[Text] = Field(None, description="Optional: arithmetic over `params` names giving matrix-unit operations.")
    bytes: Optional[Text] = Field(None, description="The fewest bytes that must move, as arithmetic over `params`; required for cuda claims.")
    memory: Optional[Memory] = Field(
        None, description="What verification holds, for the memory estimate; required for cuda claims.")
    sweep: Optional[dict[str, list[Scalar]]] = Field(
        None, description="Optional: one `params` name and the values to measure it at, e.g. `{cols: [1024, 4096, 16384]}`. "
        f"Each point is measured and recorded on its own ({MIN_SWEEP_POINTS} to {MAX_SWEEP_POINTS} values, among them "
        "the one `params` gives); the claim's verdict and its published number stand on `params` alone.")

    @model_validator(mode="after")
    def _one_axis(self) -> "Workload":
        if self.sweep is None:
            return self
        if len(self.sweep) != 1:
            raise ValueError(f"sweep names one params name, not {len(self.sweep)}: sweep one axis per claim")
        (axis, values), = self.sweep.items()
        if axis not in self.params:
            raise ValueError(f"sweep axis `{axis}` is not a params name; one of {', '.join(sorted(self.params))}")
        here = self.params[axis]
        if not MIN_SWEEP_POINTS <= len(values) <= MAX_SWEEP_POINTS:
            raise ValueError(f"sweep {axis} has {len(values)} values; give {MIN_SWEEP_POINTS} to {MAX_SWEEP_POINTS}")
        if any(type(v) is not type(here) for v in values):
            raise ValueError(f"sweep {axis} values must all be {type(here).__name__}, as params {axis} is")
        if len(set(values)) != len(values):
            raise ValueError(f"sweep {axis} lists a value twice")
        if here not in values:
            raise ValueError(f"sweep {axis} must include params {axis} ({here!r}): the verdict stands on that point")
        return self

    def off_points(self) -> list[Scalar]:
        """The sweep's values other than the claim's own, in the claim's order: the extra points to measure."""
        if self.sweep is None:
            return []
        (axis, values), = self.sweep.items()
        return [v for v in values if v != self.params[axis]]

    def at(self, value: Scalar) -> "Workload":
        """This workload with its sweep axis at ``value``: what a sweep point is run with."""
        assert self.sweep is not None
        (axis,) = self.sweep
        return self.model_copy(update={"params": {**self.params, axis: value}})


class Precision(_Model):
    """The number format the kernel computes in."""

    dtype: Dtype = Field(description="Operand precision: " + " | ".join(DTYPES))
    accumulate: Optional[Dtype] = Field(None, description="Optional: accumulator precision.")
    check_dtype: Optional[Literal["float64", "float32", "float16"]] = Field(
        None, description="Optional: dtype for CPU correctness checks (the Triton interpreter has no bf16/fp8 arithmetic).")


class Side(_Model):
    """One side of the comparison: the kernel, or the baseline."""

    name: Text = Field(description="A human name, e.g. `torch.softmax, eager`.")
    impl: ImplRef = Field(description="The function called as `fn(*operands)`; returns a tensor or a tuple of tensors.")
    prepare: Optional[ImplRef] = Field(None, description="Optional, untimed: turns the inputs into this side's operands.")
    backend: Optional[Literal[BACKENDS]] = Field(  # type: ignore[valid-type]
        None, description="Optional: torch | triton | cupy | cpu; inferred from the file's imports when absent.")


class Correctness(_Model):
    """How the kernel's answer is checked against a float64 reference."""

    method: Literal["allclose", "exact"] = Field(description="allclose | exact")
    reference: Text = Field(
        description="`path.py:function` computing the answer in float64 from the inputs, or `baseline-float64`.")
    max_rel_l2: Optional[NonNeg] = Field(None, description="allclose: bound on ||out - ref|| / ||ref||.")
    rtol: Optional[NonNeg] = Field(None, description="allclose: elementwise |out - ref| <= atol * max|ref| + rtol * |ref|.")
    atol: Optional[NonNeg] = Field(None, description="allclose: absolute bound, relative to max|ref|.")
    properties: list[Literal[PROPERTIES]] = Field(  # type: ignore[valid-type]
        default_factory=list, description="Optional: deterministic | batch-invariant.")
    trials: Annotated[int, Field(ge=1, le=1000)] = Field(5, description="Fresh random inputs per trial.")
    forbidden: list[Text] = Field(default_factory=list, description="Optional: names and ops the kernel must not use.")
    tolerance_reason: Optional[Text] = Field(None, description="Why a tolerance above the precision's ceiling is justified.")

    @field_validator("reference")
    @classmethod
    def _ref(cls, v: str) -> str:
        if v != "baseline-float64" and not re.match(IMPL_RE, v):
            raise ValueError("must be `path/to/file.py:function` or `baseline-float64`")
        return v

    @model_validator(mode="after")
    def _bounds(self) -> "Correctness":
        if self.method == "allclose":
            missing = [k for k in ("max_rel_l2", "rtol", "atol") if getattr(self, k) is None]
            if missing:
                raise ValueError("allclose needs " + ", ".join(missing))
        return self


class Claimed(_Model):
    """The number the claim asserts."""

    metric: Literal[METRICS] = Field(description="speedup | time_us | tflops | gbps | sol_fraction")  # type: ignore[valid-type]
    value: Annotated[float, Field(gt=0, allow_inf_nan=False)] = Field(description="The claimed value.")
    tolerance: Annotated[float, Field(ge=0, lt=1, allow_inf_nan=False)] = Field(
        description="One-sided: a measurement of at least value x (1 - tolerance) reproduces it.")
    max_ci_halfwidth: Optional[Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)]] = Field(
        None, description="Optional: the widest 95% CI, as half-width over value, that may still be verified "
        "(default 0.02 on cuda, 0.05 on cpu). Tightening is always allowed; loosening needs `precision_reason`.")
    precision_reason: Optional[Text] = Field(
        None, description="Why a `max_ci_halfwidth` looser than the device's default is justified; `claimbench check` shows it.")

    @model_validator(mode="after")
    def _reason_needs_bound(self) -> "Claimed":
        if self.precision_reason and self.max_ci_halfwidth is None:
            raise ValueError("precision_reason explains a loosened max_ci_halfwidth; set max_ci_halfwidth or drop the reason")
        return self


class Claim(_Model):
    """One claim file: every block is required unless marked optional."""

    id: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]{0,99}$")] = Field(
        description="Equals the file name without `.yaml`; lowercase letters, digits, `.`, `_`, `-`.")
    title: Text = Field(description="One line saying what is compared.")
    entry: Text = Field(description="The LIST.md entry: its name, or `Section > Name` when the name is ambiguous.")
    source: Source
    hardware: HardwareSpec
    workload: Workload
    precision: Precision
    kernel: Side
    baseline: Side
    correctness: Correctness
    claimed: Claimed


POLICY_FIELDS = ("hardware", "workload", "precision", "baseline", "correctness")


def json_schema() -> dict[str, Any]:
    """Draft-07 JSON Schema, for editors (yaml-language-server)."""
    return draft07_schema(Claim)
