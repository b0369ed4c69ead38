"""Issue 11's cheat families, run through the real runner: none may end `verified`.

Each fixture under tests/fixtures/kernels/cheat/ is a short port of a published reward hack
(docs/threats.md names the source of each and the part of the design meant to stop it). A case
writes a softmax claim around the fixture into a temporary project (tests/cheat_project.py) and
runs it with `run_one`; the task side stays tests/fixtures/kernels/softmax_cpu.py. The honest
kernel runs in the same project as the control: it must verify, or the refusals prove nothing.

Where a trick has to get past the static rules (rules.py) before it can run at all, there are two
fixtures: the plain one, which `check` refuses, and a `_hidden` one that evades the rules the way
an attacker would; the process design is the guarantee, not the rules.

Claimed values. Most cases claim ANY (0.001x), which any correct kernel clears even when the
machine is busy, so a cheat must be caught for what it does, not for its number. Cheats whose
kernel is honest and which only bend the measurement (the clock, a slowed baseline) claim
UNREACHABLE instead: an honest kernel here runs at about half the speed of torch.softmax, and
the cheats report 7-9x today; the second control shows that the honest kernel does not reach it.
Every claim runs with one thread: two OpenMP threads on this project's shared two-core machines
take about 8 ms for any op when another process holds a core, which would drown every timing.

Cost: about 35 claim processes, each importing torch (about 3 s of a claim's 4 s today); the
file took 100-160 s of wall time on a shared two-core machine under a load of 4-6, 46 s of CPU.

Cases that today's runner verifies carry NEEDS_ISSUE_11 (a strict xfail): they document the
holes that the out-of-process judge closes; the marks go as it lands. The hostile fixtures (they
write into the project, leave processes behind, or kill their parent) run in projects of their
own; the two that kill processes run only inside a `pytest --claims` subprocess, never here.
They run in their `_hidden` versions, which get past static rules that refuse process control;
the plain versions are only checked, never run.
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
from cheat_project import make_project, seed_ceilings, write_claim

import claimbench
from claimbench.detect import detect
from claimbench.policy import check_file
from claimbench.runner import RunOptions, run_one
from claimbench.status import Status

# only a failed assertion counts as the expected failure: a crash of the test itself stays an error
NEEDS_ISSUE_11 = pytest.mark.xfail(strict=True, raises=AssertionError,
                                   reason="issue 11: needs the out-of-process judge")

PARAMS = "{rows: 256, cols: 2000}"  # each call over 50 us, so every timed call is timed (and checkable) alone
ANY = "0.001"
UNREACHABLE = "1.5"
TIMING = {"max_time_s": 0.5, "warmup_s": 0.05, "min_samples": 15}  # at least three rounds: a CI
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
    today: str                  # "verified" (a hole, marked) or "policy" (refused by check today)
    value: str = ANY
    reference: str = "kernels/softmax_cpu.py:reference_fp64"


CASES = {
    # lazy outputs
    "lazy_detach": Case("lazy outputs", WRONG, "verified"),
    "lazy_tuple": Case("lazy outputs", WRONG, "verified"),
    "lazy_mode": Case("lazy outputs", WRONG, "verified"),
    # watching the watcher
    "watch_trace": Case("watching the watcher", POLICY, "policy"),
    "watch_trace_hidden": Case("watching the watcher", WRONG, "verified"),
    "watch_frames": Case("watching the watcher", POLICY, "policy"),
    "watch_frames_hidden": Case("watching the watcher", WRONG, "verified"),
    "drop_failures": Case("watching the watcher", POLICY, "policy"),
    "drop_failures_hidden": Case("watching the watcher", WRONG, "verified"),
    # patching the judge or the clock (today `check` does not protect claimbench's modules)
    "patch_judge": Case("patching the judge", WRONG | {S.ERROR}, "verified"),
    "patch_judge_hidden": Case("patching the judge", WRONG | {S.ERROR}, "verified"),
    "patch_clock": Case("patching the clock", BENT, "verified", UNREACHABLE),
    "patch_clock_hidden": Case("patching the clock", BENT, "verified", UNREACHABLE),
    # sabotaging the baseline
    "baseline_globals": Case("sabotaging the baseline", POLICY, "policy", UNREACHABLE),
    "baseline_globals_hidden": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "patch_softmax_import": Case("sabotaging the baseline", POLICY, "policy", UNREACHABLE),
    "patch_softmax_import_alias": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "patch_softmax_import_hidden": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "patch_softmax_around": Case("sabotaging the baseline", POLICY, "policy", UNREACHABLE),
    "patch_softmax_around_hidden": Case("sabotaging the baseline", BENT, "verified", UNREACHABLE),
    "nan_reference": Case("sabotaging the baseline", POLICY, "policy"),
    "nan_reference_hidden": Case("sabotaging the baseline", WRONG | {S.ERROR}, "verified"),
    "nan_reference_rows": Case("sabotaging the baseline", WRONG | {S.ERROR}, "verified",
                               reference="kernels/cheat/nan_reference_task.py:reference_rows"),
    # stealing the machine: the kernels are honest; the census must see what they changed
    "steal_hogs": Case("stealing the machine", CAUGHT, "verified"),
    "steal_hogs_hidden": Case("stealing the machine", CAUGHT, "verified"),
    "steal_affinity": Case("stealing the machine", CAUGHT, "verified"),
    "steal_affinity_hidden": Case("stealing the machine", CAUGHT, "verified"),
    "steal_threads": Case("stealing the machine", CAUGHT, "verified"),
    # run with one thread, it computes with two and the record says one
    "steal_threads_self": Case("stealing the machine", CAUGHT, "verified"),
    # forging the report
    "forged_exit": Case("forging the report", CAUGHT, "verified"),
}


def _param(name: str):
    return pytest.param(name, marks=NEEDS_ISSUE_11) if CASES[name].today == "verified" else name


@pytest.fixture(scope="module")
def hw():
    return detect(Path.cwd())


def _new_project(root: Path, hw) -> Path:
    project = make_project(root)
    seed_ceilings(project / "results" / "runs" / ".cache", hw)
    return project


@pytest.fixture(scope="module")
def project(tmp_path_factory, hw):
    project = _new_project(tmp_path_factory.mktemp("families") / "proj", hw)
    yield project
    _kill(_strays(project))


def _run(project: Path, hw, claim_id: str, file: str, *, value: str = ANY,
         reference: str = "kernels/softmax_cpu.py:reference_fp64"):
    path = write_claim(project, claim_id, file, params=PARAMS, value=value, reference=reference)
    opts = RunOptions(results=project / "results" / "runs", timeout_s=120.0, threads=1, timing=dict(TIMING))
    return run_one(path, project, hw, opts)


# -- the controls ------------------------------------------------------------------------

def test_honest_control_verifies(project, hw):
    out = _run(project, hw, "control-honest", "honest")
    assert out.status == S.VERIFIED, out.reason


def test_honest_control_does_not_reach_the_unreachable_claim(project, hw):
    out = _run(project, hw, "control-unreachable", "honest", value=UNREACHABLE)
    assert out.status in (S.REFUTED, S.INCONCLUSIVE), out.reason


# -- the families --------------------------------------------------------------------------

@pytest.mark.parametrize("name", [_param(n) for n in CASES])
def test_cheat_is_never_verified(project, hw, name):
    case = CASES[name]
    out = _run(project, hw, name.replace("_", "-"), name, value=case.value, reference=case.reference)
    assert out.status != S.VERIFIED, f"{case.family}: {out.reason}"
    assert out.status in case.allowed, (out.status, out.reason)
    if case.today == "policy":  # the plain version stays a static-rule refusal
        assert out.reason.startswith("policy:"), out.reason


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
    """Each hostile fixture once, in a project of its own with a committed record, cached."""
    done: dict[str, Hostile] = {}
    projects: list[Path] = []

    def run(name: str) -> Hostile:
        if name not in done:
            project = _new_project(tmp_path_factory.mktemp(name) / "proj", hw)
            projects.append(project)
            for rel in (COMMITTED, EARLIER):
                (project / rel).parent.mkdir(parents=True)
                record = {"claim_id": Path(rel).parent.name, "verdict": "refuted", "value": 0.9}
                (project / rel).write_text(json.dumps(record))
            write_claim(project, "bystander", "honest", params=PARAMS)
            before = _tree(project)
            out = _run(project, hw, name.replace("_", "-"), name)
            after = _tree(project)
            orphans = _orphans(project)  # looked for at once: the claim is over
            _kill(_strays(project))
            after.pop(f"claims/{name.replace('_', '-')}.yaml", None)  # this run's own claim
            done[name] = Hostile(out, before, after, orphans)
        return done[name]

    yield run
    for project in projects:
        _kill(_strays(project))


# the `_hidden` versions: they reach the runtime even past static rules that refuse process
# control and `os.utime`, so what keeps them from the evidence is the process design
HOSTILE = ["evidence_records_hidden", "evidence_tree_hidden", "outlive_setsid_hidden"]


@pytest.mark.parametrize("name", HOSTILE)
@NEEDS_ISSUE_11
def test_hostile_kernel_is_never_verified(hostile, name):
    out = hostile(name).outcome
    assert out.status != S.VERIFIED and out.status in CAUGHT, (out.status, out.reason)


@pytest.mark.parametrize("name", ["evidence_records_hidden", "evidence_tree_hidden"])
@NEEDS_ISSUE_11
def test_a_kernel_changes_no_record_and_nothing_in_the_project(hostile, name):
    h = hostile(name)
    assert sorted(h.after) == sorted(h.before), "files appeared or vanished"
    changed = [k for k in h.before if h.after[k] != h.before[k]]
    assert not changed, f"changed: {changed}"


@NEEDS_ISSUE_11
def test_no_process_of_the_claim_survives_it(hostile):
    h = hostile("outlive_setsid_hidden")
    assert not h.orphans, f"the setsid grandchild outlived the claim: pids {h.orphans}"


# -- the plain hostile versions: the static rules refuse them, nothing runs -------------------

PLAIN_HOSTILE = ["evidence_records", "evidence_tree", "outlive_setsid", "kill_parent", "kill_ancestors"]
WIDER_RULES = pytest.mark.xfail(strict=True, raises=AssertionError,
                                reason="issue 11: static rules refusing process control and os.utime")


@pytest.mark.parametrize("name", PLAIN_HOSTILE)
@WIDER_RULES
def test_plain_hostile_kernel_is_refused_by_check(tmp_path, name):
    project = make_project(tmp_path / "proj")
    checked = check_file(write_claim(project, name.replace("_", "-"), name, params=PARAMS), project)
    assert not checked.ok, f"{name}: `check` lets it run"


# -- the hostile ones that kill: only inside a pytest --claims subprocess -------------------

def _pytest_claims(project: Path, timeout_s: float = 300.0) -> tuple[subprocess.CompletedProcess, Path]:
    src = Path(claimbench.__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
           "OMP_NUM_THREADS": "1"}
    junit = project / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--claims", "claims", "--claims-root", ".",
           "--claims-results", "results/runs", "--claims-max-time-s", "0.5", "--claims-warmup-s", "0.05",
           "--timing", "report", "--junitxml", str(junit), "--basetemp", str(project / ".pytest-tmp")]
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
    pytest.param("kill_parent_hidden", marks=NEEDS_ISSUE_11, id="kill_parent_hidden"),
    pytest.param("kill_ancestors_hidden", id="kill_ancestors_hidden", marks=[
        NEEDS_ISSUE_11, pytest.mark.skipif(shutil.which("bwrap") is None, reason=(
            "without bubblewrap nothing keeps a same-user process from signalling its ancestors: the "
            "design's answer is bwrap's PID namespace"))]),
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
    assert proc.returncode == 1, f"pytest ended with {proc.returncode}: {tail}"
    assert junit.is_file(), f"no JUnit report: {tail}"
    assert _junit_cases(junit) == {"a-killer": "failed", "b-honest-after": "passed"}, tail
