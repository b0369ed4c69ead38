"""The pytest plugin through pytester: outcomes, --timing report, JUnit properties, CI selection."""

import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from claimbench import runner
from claimbench.machine import detect as detect_mod
from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software
from claimbench.options import TimingLimits
from claimbench.runner import Outcome
from claimbench.stats.status import Status

pytest_plugins = ["pytester"]

FIX = Path(__file__).resolve().parents[1] / "fixtures"
SW = Software("3.11", "2.13", None, None, None, "0.1", "abc123", False)
CPU_HW = Hardware("cpu", (), CpuInfo("Fake CPU", 2, 2, None, None), SW)
GPU = GpuInfo(0, "NVIDIA H200", None, "9.0", 132, None, None, "570.1", "12.8",
              None, None, None, None, None, None, None, False, True)
GPU_HW = Hardware("cuda", (GPU,), CpuInfo("Fake CPU", 2, 2, None, None), SW)

CLAIM = """id: {id}
title: t
entry: NCCL
source: {{kind: implementer-report, title: t, url: "https://example.org/x", locator: s}}
hardware: {{device: {device}, model: ["{model}"]}}
workload: {{inputs: "kernels/k.py:make_inputs", params: {{n: 4}}, bytes: "n * 4"}}
precision: {{dtype: float32}}
kernel: {{name: k, impl: "kernels/k.py:kernel"}}
baseline: {{name: b, impl: "kernels/k.py:baseline"}}
correctness: {{method: exact, reference: "kernels/k.py:reference"}}
claimed: {{metric: speedup, value: 1.5, tolerance: 0.1}}
"""

VERDICTS = {"ok": (Status.VERIFIED, "speedup 1.6 [1.55, 1.65]"), "nogpu": (Status.SKIPPED, "needs NVIDIA H100*, found CPU"),
            "wrong": (Status.INCORRECT, "trial 1: rel L2 error 0.5 > max_rel_l2 1e-05"),
            "slow": (Status.REFUTED, "speedup 1.1 [1.0, 1.2] vs claimed 1.5")}


@pytest.fixture
def fake(monkeypatch):
    """Fake detection and a fake run_one that answers from the claim file's name."""
    calls = []
    hw = {"value": CPU_HW}

    def run_one(path, root, hw_, opts, listing=None, servers=None):
        calls.append((Path(path).stem, opts))
        status, reason = VERDICTS.get(Path(path).stem, (Status.VERIFIED, "fine"))
        value = 1.6 if status is not Status.SKIPPED else None
        return Outcome(Path(path).stem, Path(path), status, reason, Path("/r/rec.json"), value,
                       value and 1.55, value and 1.65, "speedup", 1.5, hw_.name)

    monkeypatch.setattr(runner, "run_one", run_one)
    monkeypatch.setattr(detect_mod, "detect", lambda root, **kw: hw["value"])
    return {"calls": calls, "hw": hw}


def _claims(pytester, names, device="cpu", model="*"):
    d = pytester.path / "claims"
    d.mkdir(exist_ok=True)
    for n in names:
        (d / f"{n}.yaml").write_text(CLAIM.format(id=n, device=device, model=model))


def test_inert_without_claims(pytester, fake):
    _claims(pytester, ["ok"])
    pytester.makepyfile("def test_x():\n    pass\n")
    res = pytester.runpytest()
    res.assert_outcomes(passed=1)
    assert fake["calls"] == []


def test_verdicts_map_to_pass_skip_fail(pytester, fake):
    _claims(pytester, ["ok", "nogpu", "wrong", "slow"])
    pytester.makepyfile("def test_x():\n    pass\n")  # not collected: --claims alone runs only the claims
    res = pytester.runpytest("--claims", "claims", "-rs", "-v")
    res.assert_outcomes(passed=1, skipped=1, failed=2)
    res.stdout.fnmatch_lines(["*claims/ok.yaml::ok PASSED*", "*claim wrong: incorrect*", "*rel L2 error 0.5*",
                              "SKIPPED [1] claims/nogpu.yaml:1: needs NVIDIA H100*, found CPU"])
    assert res.ret == 1
    assert sorted(c for c, _ in fake["calls"]) == ["nogpu", "ok", "slow", "wrong"]


def test_timing_report_passes_timing_verdicts_only(pytester, fake):
    _claims(pytester, ["ok", "wrong", "slow"])
    res = pytester.runpytest("--claims", "claims", "--claims-timing", "report")
    res.assert_outcomes(passed=2, failed=1, warnings=1)
    res.stdout.fnmatch_lines(["*ClaimTimingWarning: slow: refuted (reported, not gated)*"])


def test_old_option_spellings_still_work_with_a_deprecation_warning(pytester, fake):
    _claims(pytester, ["ok", "slow"])
    res = pytester.runpytest("--claims", "claims", "--timing", "report", "-W", "default::DeprecationWarning")
    res.assert_outcomes(passed=2, warnings=2)
    res.stdout.fnmatch_lines(["*--timing is deprecated: use --claims-timing*"])


def test_every_plugin_option_has_the_one_prefix():
    from claimbench.ci import pytest_plugin

    seen = []

    class Group:
        def addoption(self, *names, **kw):
            seen.append(names)

    class Parser:
        def getgroup(self, *a, **kw):
            return Group()

    pytest_plugin.pytest_addoption(Parser())
    assert len(seen) >= 9
    for names in seen:
        assert names[0].startswith("--claims"), names
        assert all(n.startswith("--claims") or pytest_plugin.DEPRECATED.get(n) == names[0] for n in names), names


def test_junit_gets_hardware_and_per_claim_properties(pytester, fake):
    fake["hw"]["value"] = GPU_HW
    _claims(pytester, ["ok", "wrong"])
    pytester.runpytest("--claims", "claims", "--junitxml=out.xml")
    tree = ET.parse(pytester.path / "out.xml")
    suite = tree.getroot().find("testsuite")
    props = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert props["claimbench.hardware"] == "NVIDIA H200"
    assert props["claimbench.device"] == "cuda"
    assert props["claimbench.gpu_count"] == "1"
    assert props["claimbench.git_commit"] == "abc123"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    ok = {p.get("name"): p.get("value") for p in cases["ok"].find("properties")}
    assert ok["verdict"] == "verified" and ok["value"] == "1.6" and ok["ci_low"] == "1.55" and ok["ci_high"] == "1.65"
    assert ok["record"] == "/r/rec.json"
    wrong = {p.get("name"): p.get("value") for p in cases["wrong"].find("properties")}
    assert wrong["verdict"] == "incorrect"
    assert cases["wrong"].find("failure") is not None


def test_options_reach_run_one(pytester, fake):
    _claims(pytester, ["ok"])
    pytester.runpytest("--claims", "claims", "--claims-timeout-s", "12", "--claims-results", "out",
                       "--claims-max-time-s", "0.5", "--claims-repeat", "2", "--claims-threads", "1",
                       "--claims-sandbox", "none", "--claims-max-memory", "0.5", "--claims-hot").assert_outcomes(passed=1)
    opts = fake["calls"][0][1]
    assert opts.timeout_s == 12.0
    assert opts.results == (pytester.path / "out").resolve()
    assert opts.timing == TimingLimits(max_time_s=0.5)
    assert (opts.repeat, opts.threads, opts.sandbox, opts.max_memory_bytes, opts.hot) == (2, 1, "none", 1 << 29, True)


def test_the_old_timeout_spelling_works_and_warns(pytester, fake):
    _claims(pytester, ["ok"])
    res = pytester.runpytest("--claims", "claims", "--claims-timeout", "12")
    res.assert_outcomes(passed=1)
    res.stdout.fnmatch_lines(["*--claims-timeout is deprecated: use --claims-timeout-s*"])
    assert fake["calls"][0][1].timeout_s == 12.0


def test_a_bad_value_is_a_usage_error_naming_the_plugin_flag(pytester, fake):
    _claims(pytester, ["ok"])
    res = pytester.runpytest("--claims", "claims", "--claims-repeat", "0")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*--claims-repeat 0: must be at least 1*"])
    assert fake["calls"] == []


def test_summary_lists_every_claim(pytester, fake):
    _claims(pytester, ["ok", "wrong"])
    summary = pytester.path / "summary.md"
    pytester.runpytest("--claims", "claims", "--claims-summary", str(summary)).assert_outcomes(passed=1, failed=1)
    text = summary.read_text()
    assert "2 claim(s) on Fake CPU" in text and "| `ok` |" in text and "| `wrong` |" in text
    assert "1.6 [1.55, 1.65]" in text and "incorrect" in text


def test_require_gpu_exits_1_without_one(pytester, fake):
    _claims(pytester, ["ok"])
    res = pytester.runpytest("--claims", "claims", "--claims-require-gpu")
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*no usable CUDA GPU detected*"])
    assert fake["calls"] == []


def test_hardware_only_runs_what_this_machine_can_verify(pytester, fake):
    _claims(pytester, ["ok"])
    _claims(pytester, ["gpu-claim"], device="cuda", model="NVIDIA H100*")
    res = pytester.runpytest("--claims", "claims", "--claims-hardware-only")
    res.assert_outcomes(passed=1, deselected=1)
    assert [c for c, _ in fake["calls"]] == ["ok"] and fake["calls"][0][1].hardware_only


def test_hardware_only_with_nothing_to_verify_fails(pytester, fake):
    _claims(pytester, ["gpu-claim"], device="cuda", model="NVIDIA H100*")
    res = pytester.runpytest("--claims", "claims", "--claims-hardware-only")
    assert res.ret == 1
    res.stdout.fnmatch_lines(["*none of the 1 claim(s) can be verified on this machine*"])


def test_changed_since_selects_and_a_bad_ref_is_a_usage_error(pytester, fake):
    _claims(pytester, ["ok", "wrong"])
    git = lambda *a: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *a],  # noqa: E731
                                    cwd=pytester.path, check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")
    (pytester.path / "claims" / "ok.yaml").write_text(CLAIM.format(id="ok", device="cpu", model="*").replace("1.5", "1.4"))
    res = pytester.runpytest("--claims", "claims", "--claims-changed-since", "HEAD")
    res.assert_outcomes(passed=1, deselected=1)
    res = pytester.runpytest("--claims", "claims", "--claims-changed-since", "no-such-ref")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*no-such-ref: not a commit*"])


def test_a_real_claim_writes_its_record_through_run_one(pytester, tmp_path):
    """No fakes: the CPU fixture claim runs in its worker and leaves a record where asked."""
    claim = FIX / "claims" / "valid" / "softmax-cpu.yaml"
    res = pytester.runpytest("--claims", str(claim), "--claims-results", str(tmp_path), "--claims-timing", "report",
                             "--claims-max-time-s", "0.3", "--claims-warmup-s", "0.05", "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    records = list((tmp_path / "records" / "softmax-cpu").glob("*.json"))
    assert len(records) == 1



def test_timing_off_checks_a_cpu_claim_and_records_correctness_only(pytester, tmp_path):
    """The test command's mode: the CPU claim's correctness runs and passes, nothing is timed, and
    the record says so."""
    import json

    res = pytester.runpytest("--claims", str(FIX / "claims" / "valid" / "softmax-cpu.yaml"),
                             "--claims-results", str(tmp_path), "--claims-timing", "off",
                             "--junitxml", str(tmp_path / "j.xml"), "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1)
    rec = json.loads(next((tmp_path / "records" / "softmax-cpu").glob("*.json")).read_text())
    assert rec["mode"] == "correctness-only" and rec["verdict"] == "skipped" and rec["value"] is None
    assert "timing not run: correctness only" in rec["reason"] and rec["correctness"]["passed"] is True
    assert "not measured: timing not run" in (tmp_path / "j.xml").read_text()


def test_a_cpu_check_that_could_not_run_fails_its_item_and_one_that_passed_passes(pytester, tmp_path):
    """No fakes: a GPU claim on this CPU machine passes when its interpreted check passed, and the
    planted fault (a kernel module that raises at import) fails, never skips."""
    fixtures = pytester.path / "proj"
    for folder in ("kernels", "claims"):
        shutil.copytree(FIX / folder, fixtures / folder)
    shutil.copy(FIX / "LIST.md", fixtures / "LIST.md")
    res = pytester.runpytest("--claims", str(fixtures / "claims/valid/triton-rowmax.yaml"),
                             "--claims", str(fixtures / "claims/wrong/import-fails.yaml"),
                             "--claims-results", str(tmp_path), "--claims-root", str(fixtures),
                             "-p", "no:cacheprovider")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*claim import-fails: error*", "*CPU correctness check could not run*planted fault*"])


def test_claims_measure_one_at_a_time_across_workers(tmp_path):
    """While one worker's claim holds the lock, another process cannot take it."""
    import sys

    from claimbench.orchestrator.lock import lock_path, one_claim_at_a_time

    probe = ("import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n")
    with one_claim_at_a_time(tmp_path):
        held = subprocess.run([sys.executable, "-c", probe, str(tmp_path)])
    free = subprocess.run([sys.executable, "-c", probe, str(tmp_path)])
    assert (held.returncode, free.returncode) == (3, 0)
    assert not lock_path(tmp_path).exists()  # the project's folder is the lock: no file is made


def test_a_bad_list_fails_its_own_item_and_the_unit_tests_still_run(pytester, fake):
    _claims(pytester, ["ok"])
    (pytester.path / "LIST.md").write_text("# L\n\n- NCCL - x <!-- claimbench:y -->1.2×\n")
    pytester.makepyfile("def test_unit():\n    pass\n")
    res = pytester.runpytest("--claims", "claims", ".", "-v")
    assert "INTERNALERROR" not in res.stdout.str() + res.stderr.str()
    res.assert_outcomes(passed=2, failed=1)
    res.stdout.fnmatch_lines(["*::LIST.md FAILED*", "*test_unit PASSED*",
                              "*LIST.md:3: unclosed claimbench marker region (close it on the same line)*"])


def test_a_claim_file_that_is_a_symlink_loop_fails_its_own_item(pytester, fake):
    _claims(pytester, ["ok"])
    (pytester.path / "claims" / "loop.yaml").symlink_to("loop.yaml")
    res = pytester.runpytest("--claims", "claims", "-v")
    res.assert_outcomes(passed=1, failed=1)
    res.stdout.fnmatch_lines(["*loop.yaml FAILED*", "*claims/loop.yaml:1: file: is a symlink loop*"])
