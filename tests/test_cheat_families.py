"""Issue 11's cheat families, run through the real runner: none may end `verified`.

Each fixture under tests/fixtures/kernels/cheat/ is a short port of a published reward hack
(docs/threats.md names the source of each and the part of the design meant to stop it). A case
writes a softmax claim around the fixture into a temporary project (tests/cheat_project.py) and
runs it with `run_one`; the task side stays tests/fixtures/kernels/softmax_cpu.py. The honest
kernel runs in the same project as the control: it must verify (or be inconclusive only because
the shared machine was busy or the CI too wide), or the refusals prove nothing.

Where a trick has to get past the static rules (rules.py) before it can run at all, there are two
fixtures: the plain one, which `check` refuses, and a `_hidden` one that evades the rules the way
an attacker would; the process design is the guarantee, not the rules.

Claimed values. Most cases claim ANY (0.001x), which any correct kernel clears however slow it is,
so a cheat must be caught for what it does, not for its number. Cheats whose kernel is honest and
which only bend the measurement (the clock, a slowed baseline) claim UNREACHABLE instead, and
their measured value must stay below it unless the run found the machine too busy to trust any
number: an honest kernel here runs at about half the speed of torch.softmax, and these cheats
reported 7-9x under the protocol-3 runner; the second control shows that the honest kernel does
not reach it. Every claim runs with one thread: two OpenMP threads on this project's shared
two-core machines take about 8 ms for any op when another process holds a core, which would drown
every timing.

Cost: each claim runs one process (`one_process`, tests/conftest.py): every rule these cheats meet
acts within a process, and the second and third processes cost most of a claim's CPU, most of it the
correctness trials at the full size (the file with `test_runner_cheats.py`: 63 -> 49 CPU-s).

`Case.before` records what the protocol-3 runner (7f0f6cf: the kernel in the process that judged,
timed and reported) made of each fixture: nearly all were verified. Holes the current runner still
has carry `still_open(why)`, a strict xfail; remove the mark when the runner closes the hole. The
hostile fixtures (they write into the project, leave processes behind, or kill their parent) run
in projects of their own, in their `_hidden` versions, which get past static rules that refuse
process control; the plain versions are only checked, never run. The two that kill processes run
only inside a `pytest --claims` subprocess, never in this one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest
from cheat_project import make_project, write_claim
from conftest import honest_timing

import claimbench
from claimbench.gate.policy import gate_file
from claimbench.machine import landlock
from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.runner import run_one
from claimbench.stats.status import Status


def still_open(why: str):
    """A hole the runner still has: a strict xfail (only a failed assertion counts, so a crash of
    the test itself stays an error). Remove the mark when the runner closes it."""
    return pytest.mark.xfail(strict=True, raises=AssertionError, reason=f"issue 11, still open: {why}")


PARAMS = "{rows: 256, cols: 2000}"  # each call over 50 us, so every timed call is timed (and checkable) alone
ANY = "0.001"
UNREACHABLE = "1.5"
# One process (`one_process`, conftest.py): every rule these cheats meet acts within a process. 1.5 s holds
# the six to fifteen rounds three processes of 0.5 s held; the claim's interval rule stops earlier.
pytestmark = pytest.mark.usefixtures("one_process")
TIMING = {"max_time_s": 1.5, "warmup_s": 0.05}
ORPHAN_MARKER = "claimbench-redteam-orphan"  # outlive_setsid.py puts it, with the project's path, in argv

S = Status
WRONG = frozenset({S.INCORRECT, S.REJECTED})          # a wrong answer, found or refused
BENT = frozenset({S.REFUTED, S.INCONCLUSIVE, S.REJECTED, S.ERROR})  # the honest number, or refused
CAUGHT = frozenset({S.REJECTED, S.ERROR})             # what the kernel did was seen
POLICY = frozenset({S.REJECTED})                      # `check` refuses the plain version


@dataclass(frozen=True)
class Case:
    family: str
    allowed: frozenset
    before: str                 # what the protocol-3 runner (7f0f6cf, kernel in the judge's process) said
    value: str = ANY
    reference: str = "kernels/softmax_cpu.py:reference_fp64"
    plain: bool = False         # the straightforward version: `check` must refuse it
    open: str = ""              # why the runner still lets it through (a strict xfail), or ""


CASES = {
    # lazy outputs
    "lazy_detach": Case("lazy outputs", WRONG, "verified"),
    "lazy_tuple": Case("lazy outputs", WRONG, "verified"),
    "lazy_mode": Case("lazy outputs", WRONG, "verified"),
    # watching the watcher
    "watch_trace": Case("watching the watcher", POLICY, "policy", plain=True),
    "watch_trace_hidden": Case("watching the watcher", WRONG, "verified"),  # the tripwire (issue 22)
    "watch_clock": Case("watching the watcher", POLICY, "verified", plain=True),
    "watch_literal": Case("watching the watcher", POLICY, "verified", plain=True),
    "watch_reduce": Case("watching the watcher", POLICY, "verified", plain=True),
    "watch_frames": Case("watching the watcher", POLICY, "policy", plain=True),
    "watch_frames_hidden": Case("watching the watcher", WRONG, "verified"),
    "drop_failures": Case("watching the watcher", POLICY, "policy", plain=True),
    "drop_failures_hidden": Case("watching the watcher", WRONG, "verified"),
    # patching the judge or the clock
    "patch_judge": Case("patching the judge", POLICY, "verified", plain=True),
    "patch_judge_hidden": Case("patching the judge", WRONG | {S.ERROR}, "verified"),
    "patch_clock": Case("patching the clock", POLICY, "verified", UNREACHABLE, plain=True),
    "patch_clock_hidden": Case("patching the clock", BENT, "verified", UNREACHABLE),
    # sabotaging the baseline
    "baseline_globals": Case("sabotaging the baseline", POLICY, "policy", UNREACHABLE, plain=True),
    "baseline_globals_hidden": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "patch_softmax_import": Case("sabotaging the baseline", POLICY, "policy", UNREACHABLE, plain=True),
    "patch_softmax_import_alias": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "patch_softmax_import_hidden": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "patch_softmax_around": Case("sabotaging the baseline", POLICY, "policy", UNREACHABLE, plain=True),
    "patch_softmax_around_hidden": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "nan_reference": Case("sabotaging the baseline", POLICY, "policy", plain=True),
    "nan_reference_hidden": Case("sabotaging the baseline", WRONG | {S.ERROR}, "verified"),
    "nan_reference_rows": Case("sabotaging the baseline", WRONG | {S.ERROR}, "verified",
                               reference="kernels/cheat/nan_reference_task.py:reference_rows"),
    # stealing the machine: the kernels are honest; the census must see what they changed
    "steal_hogs": Case("stealing the machine", POLICY, "verified", plain=True),
    # since protocol 10 a side's seccomp filter refuses setsid (machine/pinning.py): the hogs cannot leave the
    # side's group and exit at once, and what is measured is the honest number, held below an unreachable claim
    "steal_hogs_hidden": Case("stealing the machine", BENT, "verified", UNREACHABLE),
    "steal_affinity": Case("stealing the machine", POLICY, "verified", plain=True),
    # since protocol 8 a side's seccomp filter refuses the pinning itself (machine/pinning.py): the honest number
    "steal_affinity_hidden": Case("stealing the machine", BENT, "verified", UNREACHABLE),
    "steal_threads": Case("stealing the machine", CAUGHT, "verified"),
    # run with one thread, it computes with two and the record says one
    "steal_threads_self": Case("stealing the machine", CAUGHT, "verified"),
    # forging the report
    "forged_exit": Case("forging the report", CAUGHT, "verified"),
}


def _param(name: str):
    why = CASES[name].open
    return pytest.param(name, marks=still_open(why)) if why else name


@pytest.fixture(scope="module")
def hw():
    return detect(Path.cwd())


def _new_project(root: Path, hw) -> Path:
    return make_project(root)  # the measured ceilings come from the tests' shared cache (conftest.py)


def _opts(project: Path, sandbox: str = "auto") -> RunOptions:
    return RunOptions(results=project / "results" / "runs", timeout_s=120.0, threads=1, timing=TimingLimits(**TIMING),
                      sandbox=sandbox)


@pytest.fixture(scope="module")
def project(tmp_path_factory, hw):
    """The shared project, with one fork server for all its claims, as `claimbench run` has (the
    server never runs claim code: every claim's sides are forked from it afresh)."""
    from claimbench.orchestrator.servers import Servers

    project = _new_project(tmp_path_factory.mktemp("families") / "proj", hw)
    with Servers(project, _opts(project), pooled=True) as servers:
        project_servers[project] = servers
        yield project
        project_servers.pop(project, None)
    _kill(_strays(project))


project_servers: dict = {}


def _run(project: Path, hw, claim_id: str, file: str, *, value: str = ANY,
         reference: str = "kernels/softmax_cpu.py:reference_fp64", sandbox: str = "auto"):
    path = write_claim(project, claim_id, file, params=PARAMS, value=value, reference=reference)
    return run_one(path, project, hw, opts=_opts(project, sandbox), servers=project_servers.get(project))


def _busy(out) -> bool:
    """The run says the machine was too busy to trust any number (its ratio can swing severalfold
    then, so only the verdict, which cannot be verified, is asserted)."""
    return out.status == S.INCONCLUSIVE and out.reason.startswith("machine busy")


# -- the controls ------------------------------------------------------------------------

def test_honest_control_verifies(project, hw):
    """Verified, or inconclusive only because the shared machine was busy or the CI too wide."""
    out = _run(project, hw, "control-honest", "honest")
    assert honest_timing(out), out.reason


def test_honest_control_does_not_reach_the_unreachable_claim(project, hw):
    out = _run(project, hw, "control-unreachable", "honest", value=UNREACHABLE)
    assert out.status in (S.REFUTED, S.INCONCLUSIVE), out.reason
    if not _busy(out):
        assert out.value is not None and out.value < float(UNREACHABLE) * 0.95, out.reason


# -- the families --------------------------------------------------------------------------

@pytest.mark.parametrize("name", [_param(n) for n in CASES])
def test_cheat_is_never_verified(project, hw, name, monkeypatch):
    case = CASES[name]
    if not case.plain:
        # a `_hidden` fixture stands for whatever gets past the static rules: they are bypassed, so
        # what is tested is the process design (test_hidden_variants_the_rules_refuse covers the rules)
        from claimbench.gate import policy

        monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])
    out = _run(project, hw, name.replace("_", "-"), name, value=case.value, reference=case.reference)
    assert out.status != S.VERIFIED, f"{case.family}: {out.reason}"
    assert out.status in case.allowed, (out.status, out.reason)
    if case.value == UNREACHABLE and out.value is not None and not _busy(out):
        assert out.value < float(UNREACHABLE) * 0.95, out.reason  # the number itself stays honest
    if case.plain:  # the straightforward version: the static rules refuse it before it runs
        assert out.reason.startswith("policy:"), out.reason


# Hidden variants that the static rules refuse since they learned the observation channels (clocks,
# dispatch and function modes, the profiler) and computed attribute names; the process-design test
# above still runs them with the rules bypassed.
REFUSED_HIDDEN = ("watch_trace_hidden", "watch_frames_hidden", "patch_judge_hidden")


@pytest.mark.parametrize("name", REFUSED_HIDDEN)
def test_hidden_variants_the_rules_refuse(project, name):
    path = write_claim(project, f"rules-{name.replace('_', '-')}", name, params=PARAMS, value=ANY,
                       reference="kernels/softmax_cpu.py:reference_fp64")
    res = gate_file(path, project)
    assert not res.ok and any("computed name" in p.message or "watching" in p.message for p in res.problems), \
        res.problems


# -- the hostile ones: evidence, survivors ---------------------------------------------------

COMMITTED = "results/records/committed-claim/20260101T000000Z-cpu-0123456.json"
EARLIER = "results/runs/records/earlier-claim/20260101T000000Z-cpu-6543210.json"  # an earlier run's, not yet ingested


def _tree(project: Path) -> dict[str, bytes]:
    """LIST.md, claims/, the committed store and an earlier run's folder, by path: the listing and
    every file's bytes (this run's own record goes to a folder of its own, not compared)."""
    folders = [project / "claims", project / "results" / "records", (project / EARLIER).parent]
    files = [project / "LIST.md", *(p for f in folders for p in sorted(f.rglob("*")))]
    return {str(p.relative_to(project)): (p.read_bytes() if p.is_file() else b"<dir>") for p in files}


def _strays(project: Path) -> list[int]:
    """Processes (not this one) working in the project or naming it in their argv: a claim's."""
    me, where, out = os.getpid(), str(project.resolve()), []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            cwd = os.readlink(f"/proc/{name}/cwd")
            argv = Path(f"/proc/{name}/cmdline").read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if cwd == where or cwd.startswith(where + "/") or where in argv:
            out.append(int(name))
    return out


def _orphans(project: Path) -> list[int]:
    mark = f"{ORPHAN_MARKER}:{project.resolve()}"
    found = []
    for pid in _strays(project):
        try:
            if mark in Path(f"/proc/{pid}/cmdline").read_bytes().decode("utf-8", "replace"):
                found.append(pid)
        except OSError:
            pass
    return found


def _kill(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@dataclass(frozen=True)
class Hostile:
    outcome: object
    before: dict
    after: dict
    orphans: list


@pytest.fixture(scope="module")
def hostile(tmp_path_factory, hw):
    """Each hostile fixture once per sandbox, in a project of its own, cached. The project is a git
    repository, as a real one is: the committed record, LIST.md and claims/ are committed, results/runs/
    is ignored (without bubblewrap the runner can restore only what git knows)."""
    done: dict[tuple, Hostile] = {}
    projects: list[Path] = []

    def run(name: str, sandbox: str) -> Hostile:
        if (name, sandbox) not in done:
            project = _new_project(tmp_path_factory.mktemp(f"{name}-{sandbox}") / "proj", hw)
            projects.append(project)
            for rel in (COMMITTED, EARLIER):
                (project / rel).parent.mkdir(parents=True)
                record = {"claim_id": Path(rel).parent.name, "verdict": "refuted", "value": 0.9}
                (project / rel).write_text(json.dumps(record))
            write_claim(project, "bystander", "honest", params=PARAMS)
            before = _tree(project)
            _git_commit_all(project)
            out = _run(project, hw, name.replace("_", "-"), name, sandbox=sandbox)
            after = _tree(project)
            orphans = _orphans(project)  # looked for at once: the claim is over
            _kill(_strays(project))
            after.pop(f"claims/{name.replace('_', '-')}.yaml", None)  # this run's own claim
            done[(name, sandbox)] = Hostile(out, before, after, orphans)
        return done[(name, sandbox)]

    yield run
    for project in projects:
        _kill(_strays(project))


# the `_hidden` versions: they reach the runtime even past static rules that refuse process
# control and `os.utime`, so what keeps them from the evidence is the process design
HOSTILE = ["evidence_records_hidden", "evidence_tree_hidden", "outlive_setsid_hidden"]


SANDBOXES = ["auto", "none"]  # bubblewrap where it works; the fallback: subreaper, file census, git restore


@pytest.mark.parametrize("sandbox", SANDBOXES)
@pytest.mark.parametrize("name", [
    "evidence_records_hidden", "evidence_tree_hidden", "outlive_setsid_hidden"])
def test_hostile_kernel_is_never_verified(hostile, name, sandbox):
    out = hostile(name, sandbox).outcome
    assert out.status != S.VERIFIED and out.status in CAUGHT, (out.status, out.reason)


@pytest.mark.parametrize("name, sandbox", [
    ("evidence_records_hidden", "auto"), ("evidence_records_hidden", "none"),
    ("evidence_tree_hidden", "auto"), ("evidence_tree_hidden", "none")])
def test_a_kernel_changes_no_record_and_nothing_in_the_project(hostile, name, sandbox):
    h = hostile(name, sandbox)
    assert sorted(h.after) == sorted(h.before), "files appeared or vanished"
    changed = [k for k in h.before if h.after[k] != h.before[k]]
    assert not changed, f"changed: {changed}"


@pytest.mark.parametrize("sandbox", SANDBOXES)
def test_no_process_of_the_claim_survives_it(hostile, sandbox):
    h = hostile("outlive_setsid_hidden", sandbox)
    assert not h.orphans, f"the setsid grandchild outlived the claim: pids {h.orphans}"


def _git_commit_all(project: Path) -> None:
    (project / ".gitignore").write_text("results/runs/\n.pytest-tmp/\n")
    git = ["git", "-C", str(project), "-c", "user.name=redteam", "-c", "user.email=redteam@example.org"]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "the project as committed"]):
        subprocess.run(git + args, check=True, capture_output=True)


# -- the plain hostile versions: the static rules refuse them, nothing runs -------------------

PLAIN_HOSTILE = ["evidence_records", "evidence_tree", "outlive_setsid", "kill_parent", "kill_ancestors"]


@pytest.mark.parametrize("name", PLAIN_HOSTILE)
def test_plain_hostile_kernel_is_refused_by_check(tmp_path, name):
    project = make_project(tmp_path / "proj")
    checked = gate_file(write_claim(project, name.replace("_", "-"), name, params=PARAMS), project)
    assert not checked.ok, f"{name}: `check` lets it run"


# -- the hostile ones that kill: only inside a pytest --claims subprocess -------------------

def _pytest_claims(project: Path, timeout_s: float = 300.0) -> tuple[subprocess.CompletedProcess, Path]:
    src = Path(claimbench.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "OMP_NUM_THREADS": "1"}
    junit = project / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--claims", "claims", "--claims-root", ".",
           "--claims-results", "results/runs", "--claims-timing", "off",  # the kill comes at the first call
           "--junitxml", str(junit), "--basetemp", str(project / ".pytest-tmp")]
    proc = subprocess.run(cmd, cwd=project, env=env, capture_output=True, text=True, timeout=timeout_s)
    return proc, junit


def _junit_cases(junit: Path) -> dict[str, str]:
    """testcase name -> "passed" | "failed" | "error" | "skipped"."""
    out = {}
    for tc in ET.parse(junit).getroot().iter("testcase"):
        kinds = [c.tag for c in tc if c.tag in ("failure", "error", "skipped")]
        out[tc.get("name")] = {"failure": "failed"}.get(kinds[0], kinds[0]) if kinds else "passed"
    return out


KILLERS = [
    pytest.param("kill_parent_hidden", id="kill_parent_hidden"),
    pytest.param("kill_ancestors_hidden", id="kill_ancestors_hidden", marks=[
        pytest.mark.skipif(shutil.which("bwrap") is None and landlock.abi() < 6, reason=(
            "without bubblewrap or Landlock's signal scope (ABI 6, Linux 6.12) nothing keeps a same-user "
            "process from signalling its ancestors: the design's answers are bwrap's PID namespace and the "
            "Landlock domain each side confines itself to"))]),
]


@pytest.mark.parametrize("name", KILLERS)
def test_pytest_claims_session_survives_a_kernel_that_kills(tmp_path, hw, name):
    project = _new_project(tmp_path / "proj", hw)
    (project / ".redteam-ancestor-stop").write_text(str(os.getpid()))  # kill_ancestors stops below this test
    write_claim(project, "a-killer", name, params=PARAMS, value=ANY)
    write_claim(project, "b-honest-after", "honest", params=PARAMS, value=ANY)
    try:
        proc, junit = _pytest_claims(project)
    finally:
        _kill(_strays(project))
    tail = (proc.stdout + proc.stderr)[-2000:]
    # Landlock's signal scope keeps every side's kills inside its own domain, inside bwrap too (each side
    # confines itself there as well, side/server.py `_confine`); bwrap alone lets it reach its fork server
    confined_only = name == "kill_ancestors_hidden" and landlock.abi() >= 6
    assert proc.returncode == (0 if confined_only else 1), f"pytest ended with {proc.returncode}: {tail}"
    assert junit.is_file(), f"no JUnit report: {tail}"
    # with bwrap alone the killer reaches its fork server and its item fails; under Landlock every kill of
    # a process outside the side's domain is refused (EPERM), which this one swallows, so it ran honestly
    assert _junit_cases(junit) == {"a-killer": "passed" if confined_only else "failed", "b-honest-after": "passed"}, tail
