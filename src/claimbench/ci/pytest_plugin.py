"""pytest plugin: each claim file is one test item, run by the same `run_one` as `claimbench run`.

Inert unless `--claims PATH` is given. Then:
- every `.yaml` under PATH is collected as a test whose id is the claim id (the file name);
- verified passes; skipped for hardware passes when its CPU correctness check ran and passed (the
  item tested that; its timing is reported as not measured), and skips with the reason only under
  `--claims-hardware-only`, where nothing was checked; anything else fails with the verdict's
  reason; `--claims-timing report` lets refuted and inconclusive pass with a warning (noisy shared CPU
  runners), while correctness, policy, record and execution failures still fail;
- the JUnit report gets the detected hardware as suite properties and each claim's verdict, value
  and CI as test properties (`item.user_properties`);
- `--claims-changed-since`, `--claims-hardware-only` and `--claims-require-gpu` select and refuse as
  `claimbench run` does. Every option has the `--claims` prefix; the old unprefixed spellings still
  work for one release, with a deprecation warning.
When `--claims` is given without test paths, only the claims are collected, not `testpaths`.

A bad input file fails its own item and nothing else: a LIST.md that cannot be parsed becomes a
failing `LIST.md` item (the claims then run without the entry check, which publish still makes),
and a claim file that is a symlink loop or a dangling link becomes a failing item of that name,
where pytest itself would silently skip it. Unit tests run either way.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import pytest


class ClaimTimingWarning(pytest.PytestWarning):
    """A timing verdict that `--timing report` reported instead of failing on."""


class ClaimFailed(Exception):
    def __init__(self, outcome: Any) -> None:
        super().__init__(f"{outcome.status.value}: {outcome.reason}")
        self.outcome = outcome


@dataclass
class _State:
    root: Path
    paths: list[Path]
    opts: Any                       # claimbench.options.RunOptions
    ci: Any                         # claimbench.options.CiChoices
    hw: Any = None
    listing: Any = None
    listing_error: Optional[str] = None
    ran: int = 0
    selected: Optional[set] = None
    notes: list = field(default_factory=list)
    servers: Any = None
    reported: list = field(default_factory=list)  # each claim's outcome, from its report (xdist workers' too)

    def covers(self, path: Path) -> bool:
        p = path.resolve()
        return any(p == c or p.is_relative_to(c) for c in self.paths)


_KEY = pytest.StashKey[_State]()


PREFIX = "--claims-"

# Spellings from before every option came from one table with one prefix; accepted, with a warning, until 0.3.
DEPRECATED = {"--timing": "--claims-timing", "--changed-since": "--claims-changed-since",
              "--hardware-only": "--claims-hardware-only", "--require-gpu": "--claims-require-gpu",
              "--claims-timeout": "--claims-timeout-s"}


def pytest_addoption(parser) -> None:
    from claimbench.options import OPTIONS

    g = parser.getgroup("claimbench", "claimbench: claims as tests")
    g.addoption("--claims", action="append", default=None, metavar="PATH",
                help="collect the claim files under PATH as test items (repeatable)")
    g.addoption("--claims-root", dest="claims_root", metavar="DIR", default=None,
                help="claims: project root (default: found from the claim paths)")
    old = {new: o for o, new in DEPRECATED.items()}
    for o in OPTIONS:  # the same table gives `claimbench run` its flags
        flag = PREFIX + o.name
        names = [flag] + ([old[flag]] if flag in old else [])
        g.addoption(*names, dest="claims_" + o.dest, **o.argparse_kwargs())


def pytest_configure(config) -> None:
    for arg in config.invocation_params.args:
        old = str(arg).split("=", 1)[0]
        if old in DEPRECATED:
            config.issue_config_time_warning(pytest.PytestDeprecationWarning(
                f"{old} is deprecated: use {DEPRECATED[old]} (the old spelling goes in claimbench 0.3)"), stacklevel=2)
    raw = config.getoption("claims")
    if not raw:
        return
    from claimbench.errors import UserError
    from claimbench.extras import require
    from claimbench.options import parse
    from claimbench.spec.project import find_root

    try:
        require("run", "pytest --claims")
    except UserError as e:
        raise pytest.UsageError(str(e)) from None

    missing = [p for p in raw if not Path(p).exists()]
    if missing:
        raise pytest.UsageError(f"--claims {missing[0]}: no such file or folder")
    root = find_root(config.getoption("claims_root"), raw)
    try:
        opts, ci = parse(lambda dest: config.getoption("claims_" + dest), root=root, prefix=PREFIX)
    except UserError as e:
        raise pytest.UsageError(str(e)) from None
    st = config.stash[_KEY] = _State(root=root, paths=[Path(p).resolve() for p in raw], opts=opts, ci=ci)
    if ci.summary:
        config.pluginmanager.register(_Reports(st), "claimbench-reports")
    source = getattr(config, "args_source", None)
    if source is not None and source != pytest.Config.ArgsSource.ARGS:
        config.args[:] = list(raw)  # `pytest --claims claims/` runs the claims, not testpaths too
    else:
        config.args.extend(p for p in raw if p not in config.args)


def _state(config) -> Optional[_State]:
    return config.stash.get(_KEY, None)


def pytest_sessionstart(session) -> None:
    st = _state(session.config)
    if st is None:
        return
    from claimbench.ci.selection import require_gpu
    from claimbench.errors import UserError
    from claimbench.machine.detect import detect
    from claimbench.spec.project import load_listing

    st.hw = detect(st.root)
    try:
        st.listing = load_listing(st.root)
    except UserError as e:  # the list fails its own item; the unit tests and claims still run
        st.listing_error = str(e)
    _global_properties(session.config, st.hw)
    if st.ci.require_gpu:
        try:
            require_gpu(st.hw)
        except UserError as e:
            pytest.exit(str(e), returncode=1)


def _junit_writers(config) -> list:
    """The junitxml plugin registers its writer as a plugin; found through pluggy's public registry by
    what it can do, since `record_testsuite_property` is a fixture that custom items never get."""
    return [p for p in config.pluginmanager.get_plugins() if callable(getattr(p, "add_global_property", None))]


def _global_properties(config, hw) -> None:
    writers = _junit_writers(config)
    if not writers:
        return
    sw = hw.software
    props = {"claimbench.hardware": hw.name, "claimbench.device": hw.device, "claimbench.hardware_slug": hw.slug,
             "claimbench.gpu_count": len(hw.gpus), "claimbench.gpus": ", ".join(g.name for g in hw.gpus),
             "claimbench.cpu": hw.cpu.model, "claimbench.driver": hw.gpus[0].driver_version if hw.gpus else "",
             "claimbench.torch": sw.torch or "", "claimbench.cuda_runtime": sw.cuda_runtime or "",
             "claimbench.version": sw.claimbench or "", "claimbench.git_commit": sw.git_commit or "",
             "claimbench.git_dirty": "" if sw.git_dirty is None else str(sw.git_dirty).lower()}
    for xml in writers:
        for k, v in props.items():
            xml.add_global_property(k, v)


def pytest_collect_file(file_path: Path, parent):
    st = _state(parent.config)
    if st is None or file_path.suffix not in (".yaml", ".yml") or not st.covers(file_path):
        return None
    return ClaimFile.from_parent(parent, path=file_path)


class ClaimFile(pytest.File):
    def collect(self):
        yield ClaimItem.from_parent(self, name=self.path.stem)


def pytest_collection_modifyitems(session, config, items) -> None:
    st = _state(config)
    if st is None:
        return
    items[:0] = _bad_file_items(session, st)
    if not (st.ci.changed_since or st.opts.hardware_only):
        return
    from claimbench.ci.selection import select
    from claimbench.errors import UsageError, UserError

    claims = [i for i in items if isinstance(i, ClaimItem)]
    try:
        keep = set(select([i.path for i in claims], st.root, st.hw, changed_since=st.ci.changed_since,
                          hardware_only=st.opts.hardware_only))
    except UsageError as e:  # a bad ref: one line, pytest's usage exit
        raise pytest.UsageError(str(e)) from None
    except UserError as e:  # nothing this machine can verify: the run has failed
        st.notes.append(str(e))
        keep = set()
    dropped = [i for i in claims if i.path not in keep]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [i for i in items if i not in dropped]


def _servers(st: "_State"):
    """One fork server for the whole session (torch is imported once, not once per claim)."""
    if st.servers is None:
        from claimbench.orchestrator.servers import Servers

        st.servers = Servers(st.root, st.opts, pooled=True).__enter__()  # shared with the session's other run_one calls
    return st.servers


def pytest_unconfigure(config) -> None:
    st = config.stash.get(_KEY, None)
    if st is not None and st.servers is not None:
        st.servers.__exit__(None, None, None)
        st.servers = None


def _bad_file_items(session, st: _State) -> list:
    """One failing item per input file that cannot be read: the list, and claim files that are
    broken links (which pytest's own collection passes over without a word)."""
    from claimbench.gate.claimfiles import find_claims

    out = []
    if st.listing_error:
        out.append(BadFileItem.from_parent(session, name="LIST.md", message=st.listing_error))
    _, problems = find_claims([str(p) for p in st.paths], st.root)
    for p in problems:
        out.append(BadFileItem.from_parent(session, name=Path(p.path).name, message=str(p)))
    return out


class BadInputFile(Exception):
    """An input file (the list, a claim) that cannot be read; its one-line problem."""


class BadFileItem(pytest.Item):
    """An input file that cannot be read, failing as its own test with its one-line problem."""

    def __init__(self, *, message: str, **kw) -> None:
        super().__init__(**kw)
        self.message = message

    def runtest(self) -> None:
        raise BadInputFile(self.message)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, BadInputFile):
            from claimbench.spec.safetext import terminal

            return terminal(str(excinfo.value))
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.name, 0, f"file {self.name}"


class ClaimItem(pytest.Item):
    """One claim; runtest is `runner.run_one`, which checks policy, runs, decides and writes the record."""

    def runtest(self) -> None:
        from claimbench import runner

        st = _state(self.config)
        assert st is not None  # claim items are collected only while the plugin is on
        st.ran += 1
        out = runner.run_one(self.path, st.root, st.hw, opts=st.opts, listing=st.listing, servers=_servers(st))
        self.user_properties += [
            ("claim_id", out.claim_id), ("verdict", out.status.value), ("reason", out.reason),
            ("value", _text(out.value)), ("ci_low", _text(out.ci_low)), ("ci_high", _text(out.ci_high)),
            ("metric", out.metric or ""), ("claimed_value", _text(out.claimed_value)),
            ("hardware", out.hardware), ("record", str(out.record_path) if out.record_path else "")]
        status = out.status
        if status.value == "verified":
            return
        if status.value == "skipped" and out.checked:
            # its CPU correctness check ran and passed: that is what this item tested, so it passes;
            # the timing needs the claim's hardware and is reported, not pretended
            self.user_properties.append(("timing", "not measured: " + out.reason))
            return
        if status.value == "skipped":  # --hardware-only: nothing was checked, and it says so
            _skip(out.reason)
        if st.ci.timing == "report" and status.is_timing:
            self.user_properties.append(("timing", "reported, not gated"))
            warnings.warn(ClaimTimingWarning(f"{out.claim_id}: {status.value} (reported, not gated): {out.reason}"), stacklevel=2)
            return
        raise ClaimFailed(out)

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, ClaimFailed):
            o = excinfo.value.outcome
            lines = [f"claim {o.claim_id}: {o.status.value}", f"  {o.reason}"]
            if o.record_path:
                lines.append(f"  record: {o.record_path}")
            return "\n".join(lines)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, 0, f"claim {self.name}"


def _skip(reason: str) -> None:
    """Skip, reported at the claim file rather than at this line of the plugin."""
    try:
        exc = pytest.skip.Exception(reason, _use_item_location=True)
    except TypeError:  # a pytest without the (private) flag: the location is only cosmetic
        exc = pytest.skip.Exception(reason)
    raise exc


def _text(x: Optional[float]) -> str:
    return "" if x is None else f"{x:.6g}"


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    st = _state(config)
    if st is not None:
        for note in st.notes:
            terminalreporter.write_line(f"claimbench: {note}", red=True)


class _Reports:
    """Keeps each claim's outcome for `--claims-summary`. Its properties travel with the report, so
    under xdist the controller, which writes the summary, sees every worker's claims."""

    def __init__(self, st: _State) -> None:
        self.st = st

    def pytest_runtest_logreport(self, report) -> None:
        props = dict(report.user_properties)
        if report.when == "call" and "verdict" in props:
            self.st.reported.append(_outcome(Path(str(report.fspath)), props))


def _outcome(path: Path, props: dict):
    from claimbench.runner import Outcome
    from claimbench.stats.status import Status

    def num(key: str) -> Optional[float]:
        return float(props[key]) if props.get(key) else None
    return Outcome(str(props["claim_id"]), path, Status(props["verdict"]), str(props["reason"]),
                   value=num("value"), ci_low=num("ci_low"), ci_high=num("ci_high"), metric=props.get("metric") or None,
                   claimed_value=num("claimed_value"), hardware=str(props.get("hardware", "")))


def pytest_sessionfinish(session, exitstatus) -> None:
    st = _state(session.config)
    if st is None:
        return
    if st.ci.summary and not hasattr(session.config, "workerinput"):  # an xdist worker leaves it to the controller
        from claimbench.ci.summary import write_summary
        write_summary(st.ci.summary, st.hw, st.reported)
    if st.notes or (st.opts.hardware_only and st.ran == 0):
        if not st.notes:
            st.notes.append("--hardware-only: no claim ran on this machine; a runner that verifies nothing has failed")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
