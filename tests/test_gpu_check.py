"""The pure parts of scripts/gpu_check.py: budgets, tool-output parsers, spreads and fractions.

The GPU run itself cannot run here; what decides its printed verdicts can, on recorded shapes
of ncu's and compute-sanitizer's output.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import gpu_check  # noqa: E402
from gpucheck import cbrun, fidelity, plan, racecheck, repeat_claims  # noqa: E402

NCU_CSV = """\
==PROF== Connected to process 4242 (/opt/torch/.venv/bin/python3.12)
DRIVER tiny ok 6 calls {'n': 262144} in 0.4 s
==PROF== Profiling "_gc_tiny_scale" - 0: 0%....50%....100% - 1 pass
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","4242","python3.12","127.0.0.1","_gc_tiny_scale","1","7","(128, 1, 1)","(256, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","9,000"
"1","4242","python3.12","127.0.0.1","_gc_tiny_scale","1","7","(128, 1, 1)","(256, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","3,100"
"2","4242","python3.12","127.0.0.1","_gc_tiny_scale","1","7","(128, 1, 1)","(256, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","3,000"
"3","4242","python3.12","127.0.0.1","_gc_tiny_scale","1","7","(128, 1, 1)","(256, 1, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","nsecond","2,900"
"4","4242","python3.12","127.0.0.1","_attn_fwd","1","7","(256, 1, 1)","(32, 128, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","msecond","2.50"
"5","4242","python3.12","127.0.0.1","_attn_fwd","1","7","(256, 1, 1)","(32, 128, 1)","0","9.0","Command line profiler metrics","gpu__time_duration.sum","usecond","2,400.00"
"6","4242","python3.12","127.0.0.1","_attn_fwd","1","7","(256, 1, 1)","(32, 128, 1)","0","9.0","Command line profiler metrics","sm__cycles_elapsed.avg","cycle","1"
==PROF== Disconnected from process 4242
"""


def test_ncu_csv_rows_units_and_the_first_launch_dropped():
    rows = fidelity.parse_ncu_csv(NCU_CSV)
    assert [n for n, _ in rows] == ["_gc_tiny_scale"] * 4 + ["_attn_fwd"] * 2
    assert rows[0][1] == pytest.approx(9.0) and rows[4][1] == pytest.approx(2500.0) and rows[5][1] == pytest.approx(2400.0)
    med, n = fidelity.ncu_median_us(rows, "_gc_tiny_scale")
    assert n == 3 and med == pytest.approx(3.0)          # 9.0 us first launch dropped
    assert fidelity.ncu_median_us(rows, "_attn_fwd") == (pytest.approx(2400.0), 1)
    assert fidelity.ncu_median_us(rows, "grouped_kernel") == (None, 0)
    assert fidelity.parse_ncu_csv("==PROF== ERR_NVGPUCTRPERM\nno csv here") == []


def test_ratio_targets():
    assert fidelity.ratio_ok(1.029, 0.03) and not fidelity.ratio_ok(0.969, 0.03)
    assert fidelity.ratio_ok(None, 0.03) is None


SANITIZER_CLEAN = """\
========= COMPUTE-SANITIZER
DRIVER scan ok exact in 3.1 s
DRIVER streamk ok rel L2 2.1e-03 in 9.0 s
========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)
========= ERROR SUMMARY: 0 errors
"""


def test_sanitizer_summary_clean_racy_and_unfinished():
    ok, why = racecheck.verdict(racecheck.parse_sanitizer(SANITIZER_CLEAN), racecheck.KERNELS, False)
    assert ok, why
    racy = SANITIZER_CLEAN.replace("0 hazards displayed (0 errors, 0 warnings)", "3 hazards displayed (2 errors, 1 warning)") \
                          .replace("ERROR SUMMARY: 0 errors", "ERROR SUMMARY: 2 errors")
    ok, why = racecheck.verdict(racecheck.parse_sanitizer(racy), racecheck.KERNELS, False)
    assert not ok and "2 errors" in why and "3 hazards" in why
    cut = "\n".join(SANITIZER_CLEAN.splitlines()[:2])  # killed after the scan
    ok, why = racecheck.verdict(racecheck.parse_sanitizer(cut), racecheck.KERNELS, True)
    assert not ok and "streamk" in why and "timed out" in why
    wrong = SANITIZER_CLEAN.replace("DRIVER scan ok exact", "DRIVER scan FAIL 7 of 167939 elements differ")
    ok, why = racecheck.verdict(racecheck.parse_sanitizer(wrong), racecheck.KERNELS, False)
    assert not ok and "wrong result: scan" in why


def test_plan_budget_shares_minimums_and_skips():
    stages = list(gpu_check.STAGES)
    total, left = 280.0, 280.0
    got = []
    for i, s in enumerate(stages):
        b, why = gpu_check.plan_budget(s, stages[i:], left)
        assert b is not None, why
        got.append(b)
        left -= b
    assert sum(got) <= total - gpu_check.RESERVE_S + 1e-6
    assert all(b >= gpu_check.MIN_S[s] for b, s in zip(got, stages))
    b, why = gpu_check.plan_budget("claims", ["claims"], gpu_check.RESERVE_S + 5)
    assert b is None and "needs" in why
    b, _ = gpu_check.plan_budget("env", stages, 1000.0)
    assert b == gpu_check.CAP_S["env"]


def test_claim_budget_bounds():
    b = cbrun.claim_budget(60.0)
    assert b.timeout_s == 52.0 and 0.5 <= b.max_time_s <= 10.0 and 0.2 <= b.warmup_s <= 1.0
    assert b.hard_s > 60.0
    assert cbrun.claim_budget(3.0).timeout_s == 5.0
    assert cbrun.claim_budget(20.0, "cpu").timeout_s == 17.0


def test_spread():
    assert repeat_claims.spread([1.0, 1.01, 0.99]) == pytest.approx(0.02)
    assert repeat_claims.spread([1.0, None]) is None


def test_parse_outcomes_skips_stray_output():
    payload = [{"claim": "a", "status": "verified", "value": 1.5}]
    text = "warning: something\n[not json\n" + json.dumps(payload, indent=2) + "\n"
    assert cbrun.parse_outcomes(text) == payload
    assert cbrun.parse_outcomes("Traceback (most recent call last):\n  boom") == []


def test_record_numbers_fractions(tmp_path):
    rec = {"kernel": {"median_us": 1000.0}, "baseline": {"median_us": 2000.0}, "bytes": 4.0e9, "flops": 5.0e11,
           "floor_us": 930.0, "verdict": "verified", "precision": {"dtype": "bfloat16"},
           "ceilings": {"key": "g", "device": "cuda", "bandwidth_gbps": 4300.0, "measured_at": "t", "method": "m",
                        "matrix_tflops": {"bfloat16": 790.0}}}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rec))
    got = cbrun.record_numbers(str(p))
    assert got["gbps"] == pytest.approx(4000.0) and got["bw_frac"] == pytest.approx(4000.0 / 4300.0)
    assert got["tflops"] == pytest.approx(500.0) and got["rate_frac"] == pytest.approx(500.0 / 790.0)
    assert got["sol"] == pytest.approx(0.93)
    assert cbrun.record_numbers(None) == {}


def test_select_claims_cuda_only_in_pattern_order(tmp_path):
    (tmp_path / "claims").mkdir()
    for cid, dev in (("a-one", "cuda"), ("b-two", "cuda"), ("c-cpu", "cpu")):
        (tmp_path / "claims" / f"{cid}.yaml").write_text(f"id: {cid}\nhardware: {{device: {dev}, model: ['*']}}\n")
    assert [p.stem for p, _ in repeat_claims.select_claims(tmp_path, ())] == ["a-one", "b-two"]
    assert [p.stem for p, _ in repeat_claims.select_claims(tmp_path, ("b-*", "a-one", "c-cpu"))] == ["b-two", "a-one"]


def test_run_cmd_timeout_kills_children_in_their_own_session(tmp_path):
    """A claim's process starts its own session; a stage's time limit must still end it."""
    import os
    import time

    from gpucheck.stage_io import run_cmd
    pidfile = tmp_path / "child.pid"
    script = ("import subprocess, sys, time\n"
              "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
              f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
              "time.sleep(60)\n")
    p = run_cmd([sys.executable, "-c", script], timeout_s=3.0)
    assert p.timed_out
    child = int(pidfile.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:
            with open(f"/proc/{child}/stat") as f:  # a zombie awaiting its reaper counts as gone
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        raise AssertionError(f"child {child} outlived the time limit")



def test_the_plan_orders_certain_claims_first_and_a_graph_compile_last():
    """The plan's estimates are the runner's (`spec/cost`), at the window's short timing."""
    ordered = [c.claim for _, c in plan.order(sorted((ROOT / "claims").glob("*.yaml")))]
    assert ordered[-1] == "block-sparse-attention-vs-flex-attention"
    assert plan.cost(ROOT / "claims" / "attention-flash-vs-sdpa.yaml").timing_s == plan.MAX_TIME_S + plan.WARMUP_S
