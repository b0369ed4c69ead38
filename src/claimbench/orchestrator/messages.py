"""The typed messages between the orchestrator and a claim's side processes, with a version.

Everything a side says is evidence, not fact: these models only make sure it is well formed
(known kinds, no extra keys, bounded sizes). What it means is decided by the orchestrator, which
reads the bytes of outputs itself wherever it can.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Mapping, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from claimbench.versions import WIRE_VERSION  # its history is there

Role = Literal["task", "kernel", "baseline"]
Scalar = Union[bool, int, float, str, None]
ShortText = Annotated[str, Field(max_length=20_000)]
Dims = Annotated[list[Annotated[int, Field(ge=0)]], Field(max_length=16)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _Msg(_Model):
    v: Literal[2] = WIRE_VERSION


# -- pieces ---------------------------------------------------------------------------------
class TensorItem(_Model):
    """One tensor whose contiguous bytes are in the memfd at position `fd` of the message's fds."""

    item: Literal["tensor"] = "tensor"
    dtype: str
    shape: Dims
    nbytes: Annotated[int, Field(ge=0)]
    fd: Annotated[int, Field(ge=0, lt=64)]


class ScalarItem(_Model):
    """A plain number, bool, string or None among the items, in the place of an operand or output."""

    item: Literal["scalar"] = "scalar"
    value: Scalar


Item = Annotated[Union[TensorItem, ScalarItem], Field(discriminator="item")]


class Buffer(_Model):
    """Where a tensor lives in the side's memory. For CPU tensors `ptr` is the tensor's own data;
    for CUDA tensors it is a host copy the side staged (`staged`), which the orchestrator reads."""

    dtype: str
    shape: Dims
    strides: Dims
    ptr: Annotated[int, Field(ge=0)]
    span_bytes: Annotated[int, Field(ge=0)]
    device: str
    storage: tuple[int, int]          # (start, nbytes) of the storage on its own device, for alias checks
    staged: bool = False


EDIT_MAX_ELEMENTS = 1 << 15  # orchestrator/perturb.MAX_SPREAD: the most elements one edit changes


class Edit(_Model):
    """Set the elements at flat C-order `indices` (hex of little-endian int64) of input `operand`
    to the bytes `raw` (hex, one element after another): one sample's perturbation of one input.
    With `signs` (a floating-point input), first flip the sign (or the mantissa's top bit) of the elements `signs.sign_chunks`
    draws from that seed: about half of all of them."""

    operand: Annotated[int, Field(ge=0)]
    indices: Annotated[str, Field(max_length=16 * EDIT_MAX_ELEMENTS)]
    raw: Annotated[str, Field(max_length=16 * EDIT_MAX_ELEMENTS)]
    signs: Optional[Annotated[int, Field(ge=0, lt=1 << 63)]] = None
    mantissa: bool = False                # the flip's bit: the mantissa's top one, not the sign (orchestrator/signs.py)
    shift: Optional[tuple[Annotated[int, Field(ge=0)], Annotated[int, Field(ge=0)]]] = None  # rows in order: signs.shift_sorted
    low: Optional[tuple[int, int]] = None  # an integer input's range: one step within it (signs.change_ints)


class Variant(_Model):
    """A call on derived operands, for batch invariance: row `row` of operand 0 alone, or operand 0
    rolled by one row."""

    row: Optional[int] = None
    roll: bool = False


class TimerSpec(_Model):
    """How a CUDA side times a sample (cold flush, spin, events); CPU sides are timed by the clock."""

    l2_bytes: int
    flush_bytes: Optional[int] = None
    hot: bool = False
    max_sm_clock_mhz: Optional[float] = None
    nvml_index: Optional[int] = None
    device_index: int = 0                 # this rank's GPU


class DistSpec(_Model):
    """This side's place in its own process group (one group per role, across the claim's ranks)."""

    rank: int
    world: int
    local_rank: int
    backend: Literal["gloo", "nccl"]
    master_addr: str
    master_port: int
    prefix: str
    timeout_s: float


# -- orchestrator -> side -------------------------------------------------------------------
class Load(_Msg):
    """Orchestrator to a new side, first: import this ``role``'s claim code (``refs``) to run on ``device``
    in ``dtype``, with the kernel's ``forbidden`` ops and, for CUDA, its timer; answered by `Loaded`."""

    kind: Literal["load"] = "load"
    role: Role
    root: str
    refs: dict[str, str]                  # claim key -> `file.py:function`
    device: str
    dtype: str
    forbidden: list[str] = []
    timer: Optional[TimerSpec] = None
    dist: Optional[DistSpec] = None


class MakeInputs(_Msg):
    """Orchestrator to the task side: call ``workload.inputs`` with ``seed`` and ``params``; answered by
    `Inputs`, which names the new input set."""

    kind: Literal["make_inputs"] = "make_inputs"
    seed: int
    params: dict[str, Scalar]


class Reference(_Msg):
    """Orchestrator to the task side: the float64 reference for input set ``set_id`` after ``edits``
    (applied in order); answered by `Arrays`."""

    kind: Literal["reference"] = "reference"
    set_id: int
    edits: list[Edit] = []


class Drop(_Msg):
    """Orchestrator to the task side: forget input set ``set_id``; answered by `Done`."""

    kind: Literal["drop"] = "drop"
    set_id: int


class Operands(_Msg):
    """This side's inputs (memfds of its own); `prepare` runs on them once, untimed."""

    kind: Literal["operands"] = "operands"
    items: list[Item]


class Refill(_Msg):
    """Re-derive the operands in place (same addresses): after a new round's contents reached the
    input memfds, or, for a side with `prepare`, after a perturbation (CUDA: `edits` to apply to the
    device inputs first), so that `prepare` never turns the per-sample perturbation off.

    ``operands``: the edits index the prepared operands and go into them as they are, with no
    derivation: the kernel's inputs that its `prepare` passes through unchanged. Its `prepare` then
    never sees a timed call's inputs, so it cannot compute that call's answer untimed."""

    kind: Literal["refill"] = "refill"
    edits: list[Edit] = []
    operands: bool = False


class Call(_Msg):
    """Orchestrator to a kernel or baseline side: call its function on the prepared operands, ``n`` times,
    timed as ``timed`` says; answered by `Called`."""

    kind: Literal["call"] = "call"
    n: Annotated[int, Field(ge=1, le=1 << 22)] = 1
    timed: Literal["none", "cpu", "cuda"] = "none"
    trace: bool = False
    edits: list[Edit] = []                # CUDA: applied before the sample, outside the events
    variant: Optional[Variant] = None
    again: bool = False                   # a second call on the same operands (determinism)
    null: bool = False                    # the whole call path without claim code: calibrates the bracket


class Emit(_Msg):
    """Stage the last call's outputs where the orchestrator can read them (CUDA: a host copy)."""

    kind: Literal["emit"] = "emit"


class ShowOperands(_Msg):
    """Orchestrator to a calling side: where its prepared operands are now, so their bytes can be
    compared before and after a call (a kernel must not change its inputs); answered by `Prepared`."""

    kind: Literal["show_operands"] = "show_operands"


class Release(_Msg):
    """Poison and free the last call's outputs."""

    kind: Literal["release"] = "release"


class Ping(_Msg):
    """A liveness check; a side answers `Pong` before `Load` as well as after."""

    kind: Literal["ping"] = "ping"


class StreamCheck(_Msg):
    """CUDA: profile one call and report device work the events would miss (other streams)."""

    kind: Literal["stream_check"] = "stream_check"


class StreamChecked(_Msg):
    """A CUDA side's answer to `StreamCheck`: ``ok``, or ``why`` not (it becomes one of the claim's
    problems)."""

    kind: Literal["stream_checked"] = "stream_checked"
    ok: bool
    why: ShortText = ""


class Probe(_Msg):
    """Orchestrator to a calling side, after loading and between timed rounds: its thread and mode
    settings; answered by `Probed`."""

    kind: Literal["probe"] = "probe"


class Bye(_Msg):
    """Orchestrator to the fork server when closing it: kill every process and exit; a side that gets
    it exits too."""

    kind: Literal["bye"] = "bye"


# -- side -> orchestrator -------------------------------------------------------------------
class Ready(_Msg):
    """The first message of a fork server or a side: its pid as it sees itself (inside bwrap, the
    sandbox's PID namespace) and its library versions, for the record."""

    kind: Literal["ready"] = "ready"
    pid: int
    versions: dict[str, Optional[str]] = {}
    confined: int = 0                          # the Landlock ABI it confined itself with (sent before claim code loads)


class Loaded(_Msg):
    """A side's answer to `Load`: its claim code is imported; ``sources`` go into the record, and a CUDA
    side says what its timer does before each sample."""

    kind: Literal["loaded"] = "loaded"
    sources: list[str] = []               # project files the side's modules were loaded from
    flush_bytes: Optional[int] = None     # CUDA sides: the L2 flush buffer
    l2_reset: Optional[bool] = None       # CUDA sides: persisting L2 lines are reset before a sample


class Inputs(_Msg):
    """The task side's answer to `MakeInputs`: the new set's id and its items, tensors in the memfds
    passed alongside."""

    kind: Literal["inputs"] = "inputs"
    set_id: int
    items: list[Item]


class Arrays(_Msg):
    """Float64 results (the reference) in memfds."""

    kind: Literal["arrays"] = "arrays"
    items: list[Item]


class Prepared(_Msg):
    """A calling side's answer to `Operands` or `ShowOperands`: where each prepared operand lives."""

    kind: Literal["prepared"] = "prepared"
    operands: list[Optional[Buffer]]      # None for a scalar operand


class Called(_Msg):
    """A calling side's answer to `Call`: where its outputs are, its own timings and what a traced call
    saw (``ops``, ``problems``); all of it evidence only."""

    kind: Literal["called"] = "called"
    outputs: list[Buffer]
    side_us: float                        # the side's own clock over the n calls: evidence only
    event_us: Optional[float] = None      # CUDA events, per call
    throttle_reasons: Optional[int] = None
    sm_clock_mhz: Optional[float] = None
    synced: bool = False                  # CUDA: its timer found the calls wait for the GPU inside (a label only)
    ops: Annotated[list[str], Field(max_length=500)] = []
    problems: Annotated[list[ShortText], Field(max_length=50)] = []


class Outputs(_Msg):
    """A calling side's answer to `Emit`: where the staged copies of the last call's outputs are."""

    kind: Literal["outputs"] = "outputs"
    outputs: list[Buffer]


class Pong(_Msg):
    """A side's answer to `Ping`."""

    kind: Literal["pong"] = "pong"


class Probed(_Msg):
    """What the side says about its own settings: compared round to round, never trusted alone."""

    kind: Literal["probed"] = "probed"
    torch_threads: int
    interop_threads: int
    function_modes: int
    dispatch_modes: int
    autotune: dict[str, dict[str, str]] = {}   # Triton autotuners' picks, for the record


class Done(_Msg):
    """The answer to a request with nothing to report (`Drop`, `Refill`, `Release`, `KillAll`)."""

    kind: Literal["done"] = "done"


# -- orchestrator <-> fork server ------------------------------------------------------------
class Confine(_Model):
    """What a side confines itself to with Landlock before any claim code loads (machine/landlock.py):
    it may write beneath ``writable`` only, and proves a write beneath ``protected`` (the project)
    fails; ``scratch`` is where its HOME, TMPDIR and the compilers' caches point. An empty
    ``scratch`` (inside bwrap, whose private /tmp the sides share): the side makes a folder of its
    own there and may write only beneath that one, so no side writes where another reads."""

    writable: list[str]
    protected: str
    scratch: str


class Spawn(_Msg):
    """Fork a side: fds are [its channel end, its log file]."""

    kind: Literal["spawn"] = "spawn"
    role: Role
    env: dict[str, str] = {}
    max_memory_bytes: Optional[int] = None     # RLIMIT_AS, for CPU sides (CUDA reserves address space)
    confine: Optional[Confine] = None          # the landlock sandbox: confined before it says Ready
    cwd: Optional[str] = None                  # the claim's project: a server may serve several (servers.py)
    no_event_sources: bool = False             # a CPU side: may not make what fires while it is stopped (pinning.py)


class Spawned(_Msg):
    """The fork server's answer to `Spawn`: the new side's pid, which the orchestrator maps to its own."""

    kind: Literal["spawned"] = "spawned"
    pid: int                                   # as the server sees it (its PID namespace)


class KillAll(_Msg):
    """Kill every process the server has (its forks and whatever was reparented to it)."""

    kind: Literal["kill_all"] = "kill_all"


class Failed(_Msg):
    """The claim's code raised, or a side-local check refused; `key` names the claim key involved."""

    kind: Literal["failed"] = "failed"
    key: str = ""
    message: ShortText
    traceback: ShortText = ""
    verdict: Literal["error", "incorrect", "rejected"] = "error"


Message = Annotated[
    Union[Load, MakeInputs, Reference, Drop, Operands, Refill, Call, Emit, ShowOperands, Release, Ping, Probe,
          Bye, StreamCheck, StreamChecked, Ready, Loaded, Inputs, Arrays, Prepared, Called, Outputs, Pong, Probed, Done, Spawn, Spawned, KillAll,
          Failed],
    Field(discriminator="kind")]
_ADAPTER: TypeAdapter = TypeAdapter(Message)


def parse(body: bytes):
    """Validate one frame's JSON into its message model; anything else is a ProtocolError."""
    from pydantic import ValidationError

    from claimbench.orchestrator.channel import ProtocolError

    try:
        return _ADAPTER.validate_json(body)
    except ValidationError as e:
        first: Mapping[str, Any] = e.errors()[0] if e.errors() else {}
        raise ProtocolError(f"malformed message: {first.get('loc')}: {first.get('msg')}") from None
