"""The run options, declared once: `claimbench run`'s flags and the pytest plugin's `--claims-*` options.

Before, each option was written three times (the CLI, the plugin, `RunOptions`) and they drifted:
the plugin had no `--repeat`, `--threads` or `--sandbox`, and spelled the time limit `--claims-timeout`
where the CLI said `--timeout-s`. Now one `Option` row gives the name, type, default and help; the CLI
adds it as `--NAME`, the plugin as `--claims-NAME`, and `parse` turns either's values into the typed
`RunOptions` and `CiChoices` the runner and the CI selection read, with one set of range checks.

Options that only one front end has stay there: the CLI's output (`--format`, `--quiet`) and the
plugin's collection (`--claims PATH`, `--claims-root`).
This module imports nothing heavy: `check` and pytest's start-up read it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from claimbench.errors import UsageError

MAX_PROCESSES = 1024  # --repeat's bound: each bootstrap resample picks this many processes (`resample._drawable`)

TIMING_MODES = ("gate", "report", "off")


@dataclass(frozen=True)
class Option:
    """One run option. ``name`` is the flag without its dashes (`timeout-s`); its value's key is
    ``dest`` (`timeout_s`). ``flag`` options take no value (store_true)."""

    name: str
    help: str
    type: Optional[Callable[[str], Any]] = None
    default: Any = None
    choices: tuple[str, ...] = ()
    metavar: Optional[str] = None
    flag: bool = False
    group: str = "run"  # "run" | "CI": the heading it is listed under

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    def argparse_kwargs(self) -> dict[str, Any]:
        """The keywords `argparse.add_argument` and pytest's `addoption` both take."""
        if self.flag:
            return {"action": "store_true", "default": False, "help": self.help}
        kw: dict[str, Any] = {"default": self.default, "help": self.help}
        if self.type is not None:
            kw["type"] = self.type
        if self.choices:
            kw["choices"] = self.choices
        if self.metavar:
            kw["metavar"] = self.metavar
        return kw


OPTIONS: tuple[Option, ...] = (
    Option("results", "results folder (default: results/runs/, git-ignored; `claimbench ingest` copies good "
           "records into the committed results/records/)", metavar="DIR"),
    Option("repeat", "N separate processes per claim, combined into one CI (default: 3 on a CPU, 1 on a GPU; at most 1024)",
           type=int, metavar="N"),
    Option("hot", "CUDA: time back-to-back calls without L2 flush (a labelled number)", flag=True),
    Option("no-sweep", "measure each claim at its own params only, not the other points of its workload.sweep "
           "(those are recorded, never published)", flag=True),
    Option("timeout-s", "per-claim time limit in seconds, each process (default: from the claim's estimated cost, "
           "4x it and at least 300 s; 900 s for a correctness check off the claim's hardware)", type=float, metavar="S"),
    Option("max-time-s", "cap on the timed rounds per claim, in seconds", type=float, metavar="S"),
    Option("warmup-s", "warm-up time per claim, in seconds", type=float, metavar="S"),
    Option("timing", "gate: timing verdicts fail the run; report: refuted and inconclusive do not (noisy shared "
           "CPUs); off: check every claim's correctness at its check shapes and time none (the tests' mode)",
           default="gate", choices=TIMING_MODES),
    Option("threads", "CPU threads for each side process (default: all cores)", type=int, metavar="N"),
    Option("sandbox", "confine the claims' processes: auto (bubblewrap when it works here, else Landlock), "
           "bwrap or landlock (required), none", default="auto", choices=("auto", "bwrap", "landlock", "none")),
    Option("max-memory", "address-space limit of each CPU side process in GiB (default: 3/4 of the machine)",
           type=float, metavar="GIB"),
    Option("ceilings", "folder for the measured ceilings cache (default: $XDG_CACHE_HOME/claimbench)", metavar="DIR"),
    Option("node-rank", "multi-node claims: this machine's node rank (Slurm: $SLURM_NODEID)", type=int, default=0,
           metavar="N"),
    Option("master-addr", "multi-node claims: the host of node 0", metavar="HOST"),
    Option("master-port", "multi-node claims: a free port on node 0; the orchestrators use the next one", type=int,
           metavar="N"),
    Option("changed-since", "only claims whose claim file or imported project files changed since git REF (from "
           "the merge base of REF and HEAD, including uncommitted and untracked files)", metavar="REF", group="CI"),
    Option("hardware-only", "only claims this machine can verify; no CPU correctness fallback; exit 1 if none",
           flag=True, group="CI"),
    Option("require-gpu", "exit 1 at once if no CUDA GPU is detected", flag=True, group="CI"),
    Option("summary", "append a Markdown table of this run to PATH (e.g. $GITHUB_STEP_SUMMARY), kept under 1 MiB",
           metavar="PATH", group="CI"),
)


@dataclass(frozen=True)
class TimingLimits:
    """Overrides of the timing protocol's defaults (`orchestrator.protocol.TimingConfig`); None keeps its default."""

    max_time_s: Optional[float] = None
    warmup_s: Optional[float] = None
    min_samples: Optional[int] = None

    def overrides(self) -> dict[str, Any]:
        """The set ones, as the job carries them to the orchestrator."""
        return {k: v for k, v in (("max_time_s", self.max_time_s), ("warmup_s", self.warmup_s),
                                  ("min_samples", self.min_samples)) if v is not None}


@dataclass(frozen=True)
class RunOptions:
    """How to run claims, whichever front end asked (CLI, pytest plugin, `reproduce`, tests)."""

    results: Path
    timeout_s: Optional[float] = None  # per claim process; None: from its estimated cost (`spec/cost`)
    repeat: Optional[int] = None    # processes per claim; None: precision.MIN_PROCESSES for the device (3 on a CPU)
    hot: bool = False
    sweep: bool = True              # also measure a claim's other workload.sweep points (recorded, never published)
    hardware_only: bool = False
    progress: Optional[Callable[[str], None]] = None
    timing: TimingLimits = field(default_factory=TimingLimits)
    ceilings_cache: Optional[Path] = None
    threads: Optional[int] = None  # CPU threads for the sides (torch and OpenMP); None: all cores
    sandbox: str = "auto"           # auto | bwrap | none
    node_rank: int = 0              # multi-node claims: this machine's place, and where rank 0 listens
    master_addr: Optional[str] = None
    master_port: Optional[int] = None
    max_memory_bytes: Optional[int] = None  # RLIMIT_AS of each CPU side; None: 3/4 of the machine
    correctness_only: bool = False  # check every claim as off its hardware (check shapes, no timing): CI's mode


@dataclass(frozen=True)
class CiChoices:
    """What a CI front end selects and gates on, beside how each claim runs."""

    timing: str = "gate"            # gate | report | off
    changed_since: Optional[str] = None  # (--hardware-only is `RunOptions.hardware_only`: one field, read by both)
    require_gpu: bool = False
    summary: Optional[Path] = None


def _positive(prefix: str, name: str, value: Optional[float], *, at_least: float = 0.0, strict: bool = True) -> None:
    if value is None:
        return
    if value < at_least or (strict and value == at_least):
        bound = f"more than {at_least:g}" if strict else f"at least {at_least:g}"
        raise UsageError(f"{prefix}{name} {value:g}: must be {bound}")


def parse(get: Callable[[str], Any], *, root: Path, prefix: str = "--",
          progress: Optional[Callable[[str], None]] = None) -> tuple[RunOptions, CiChoices]:
    """The typed options from a front end's values (``get(dest)``), checked once for both front ends;
    a bad value is a `UsageError` naming the flag as that front end spells it (``prefix``)."""
    _positive(prefix, "repeat", get("repeat"), at_least=1, strict=False)
    if (get("repeat") or 0) > MAX_PROCESSES:  # the bootstrap refuses more (stats/resample.py)
        raise UsageError(f"{prefix}repeat {get('repeat')}: must be at most {MAX_PROCESSES}")
    _positive(prefix, "threads", get("threads"), at_least=1, strict=False)
    for name in ("timeout-s", "max-time-s", "max-memory"):
        _positive(prefix, name, get(name.replace("-", "_")))
    _positive(prefix, "warmup-s", get("warmup_s"), strict=False)
    _positive(prefix, "node-rank", get("node_rank"), strict=False)
    port = get("master_port")
    if port is not None and not 0 < port < 65535:  # the orchestrators listen on the next port
        raise UsageError(f"{prefix}master-port {port}: must be a TCP port, 1 to 65534 (the next one is the "
                         "orchestrators')")
    results, ceilings, summary, max_memory = get("results"), get("ceilings"), get("summary"), get("max_memory")
    timing = get("timing")
    if timing == "off" and get("hardware_only"):  # each would skip what the other keeps: nothing would be checked
        raise UsageError(f"{prefix}hardware-only with {prefix}timing off checks nothing: {prefix}hardware-only keeps "
                         f"only the claims this machine can measure, and {prefix}timing off measures none; drop one")
    run = RunOptions(
        results=Path(results).resolve() if results else root / "results" / "runs",
        timeout_s=get("timeout_s"), repeat=get("repeat"), hot=get("hot"), sweep=not get("no_sweep"), hardware_only=get("hardware_only"),
        progress=progress, timing=TimingLimits(max_time_s=get("max_time_s"), warmup_s=get("warmup_s")),
        ceilings_cache=Path(ceilings) if ceilings else None, threads=get("threads"), sandbox=get("sandbox"),
        node_rank=get("node_rank"), master_addr=get("master_addr"), master_port=port,
        max_memory_bytes=int(max_memory * (1 << 30)) if max_memory else None, correctness_only=timing == "off")
    ci = CiChoices(timing=timing, changed_since=get("changed_since"),
                   require_gpu=get("require_gpu"), summary=Path(summary) if summary else None)
    return run, ci
