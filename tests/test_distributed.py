"""Multi-rank claims on CPU: 2 gloo ranks end to end, a wrong rank, a failing rank, a hanging rank."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from claimbench import distributed
from claimbench.distributed import run_distributed
from claimbench.distributed_rank import RankTimer
from claimbench.distributed_report import merge_correctness
from claimbench.policy import check_file
from claimbench.seeds import draw_seeds
from claimbench.timing import Sample

DIST = Path(__file__).resolve().parent / "fixtures" / "distributed"  # its own root: claims/, kernels/, LIST.md
GLOO_CLAIM = DIST / "claims" / "allreduce-gloo.yaml"
FAST = {"warmup_s": 0.05, "max_time_s": 0.3, "min_samples": 10}


def _job(root: Path, claim_path: Path, *, mode="measured", impl=None, trials=2, check_params=None) -> dict:
    claim = check_file(claim_path, root).claim
    assert claim is not None
    d = claim.model_dump(mode="json")
    if impl:
        d["kernel"]["impl"] = impl
    if check_params is not None:
        d["workload"]["check_params"] = check_params
    return {"root": str(root), "claim": d, "device": "cpu", "dtype": "float32", "mode": mode,
            "seeds": draw_seeds(trials), "timing": FAST}


def test_two_rank_gloo_claim_end_to_end(tmp_path):
    """Through the runner: one record from rank 0, every rank's outputs checked, the topology kept."""
    from claimbench.detect import detect
    from claimbench.record import Record
    from claimbench.runner import RunOptions, run_one

    hw = detect(DIST, with_gpu=False)
    out = run_one(GLOO_CLAIM, DIST, hw, RunOptions(results=tmp_path, timeout_s=120, timing=FAST))
    assert out.status.is_timing, out.reason  # verified, refuted or inconclusive: a measured number
    rec = Record.model_validate(json.loads(out.record_path.read_text()))
    assert rec.correctness["passed"] is True
    assert "each of 2 ranks" in rec.correctness["reason"]
    first = rec.correctness["trials"][0]
    assert sorted(o["rank"] for o in first["outputs"]) == [0, 1]
    assert [r["seed"] for r in first["ranks"]] == [first["seed"], first["seed"] + 1]
    assert rec.protocol["topology"]["world_size"] == 2
    assert rec.protocol["topology"]["backend"] == "gloo"
    assert rec.protocol["timed_checks"]["checked"] > 0 and rec.protocol["timed_checks"]["failed"] == 0
    assert len(rec.kernel.samples_us) >= FAST["min_samples"]
    assert "max over 2 ranks" in rec.protocol["timer"]


def test_a_wrong_answer_on_one_rank_is_incorrect():
    res = run_distributed(_job(DIST, GLOO_CLAIM, impl="kernels/dist_sum_kernel.py:wrong_on_rank1", trials=1), 2, 120)
    assert res.get("outcome") is None, res.get("outcome_reason")
    corr = res["correctness"]
    assert corr["passed"] is False
    assert corr["reason"].startswith("rank 1:")
    ranks = corr["trials"][0]["ranks"]
    assert [r["passed"] for r in ranks] == [True, False]
    assert "timing" not in res


def test_a_failing_rank_gives_error_not_a_hang(tmp_path):
    job = {**_job(DIST, GLOO_CLAIM, impl="kernels/dist_sum_kernel.py:raises_on_rank1"), "log_path": str(tmp_path / "claim.log")}
    res = run_distributed(job, 2, 120)
    assert res["outcome"] == "error"
    assert res["outcome_reason"].startswith("rank 1: RuntimeError: rank 1 refuses")
    log = (tmp_path / "claim.log").read_text()
    assert "===== rank 1 =====" in log and "Traceback" in log  # every rank's output is kept


def test_a_hanging_rank_is_killed_and_every_rank_reaped(monkeypatch):
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def spy(*a, **kw):
        p = real(*a, **kw)
        started.append(p)
        return p

    monkeypatch.setattr(distributed.subprocess, "Popen", spy)
    job = {**_job(DIST, GLOO_CLAIM, impl="kernels/dist_sum_kernel.py:hangs_on_rank1"), "pg_timeout_s": 600}
    res = run_distributed(job, 2, 5)
    assert res["outcome"] == "timeout"
    assert "killed and reaped" in res["outcome_reason"]
    assert len(started) == 2
    for p in started:
        assert p.returncode is not None  # waited for: no zombie left
        with pytest.raises(ProcessLookupError):
            os.killpg(p.pid, 0)  # and nothing left in its process group


def test_the_nccl_claim_checks_correctness_on_gloo(root):
    """The shipped 2-GPU claim's CPU fallback: its kernel and reference run on 2 gloo ranks (small shapes)."""
    shapes = [{"numel": 10007, "world": 2}, {"numel": 1, "world": 2}, {"numel": 4097, "world": 2}]
    res = run_distributed(_job(root, root / "claims" / "nccl-allreduce-vs-reduce-broadcast.yaml", mode="correctness-only", trials=1,
                               check_params=shapes), 2, 120)
    assert res.get("outcome") is None, res.get("outcome_reason")
    assert res["correctness"]["passed"] is True, res["correctness"]["reason"]
    assert res["rejections"] == []
    assert [t["params"]["numel"] for t in res["correctness"]["trials"]] == [10007, 1, 4097]
    assert "timing" not in res


def test_merge_names_the_rank_that_failed_and_keeps_shared_rejections_once():
    ok = {"passed": True, "reason": "", "rejections": ["same"],
          "trials": [{"seed": 5, "params": {"n": 1}, "dtype": "float32", "passed": True, "reason": "",
                      "outputs": [{"rel_l2": 0.0, "passed": True}]}]}
    bad = {"passed": False, "reason": "trial 1: off", "rejections": ["same", "only here"],
           "trials": [{"seed": 6, "params": {"n": 1}, "dtype": "float32", "passed": False, "reason": "off",
                       "outputs": [{"rel_l2": 1.0, "passed": False}]}]}
    m = merge_correctness([ok, bad], "cpu", "float32")
    assert m["passed"] is None  # rejections outrank a pass/fail
    assert m["rejections"] == ["same", "rank 1: only here"]
    t = m["trials"][0]
    assert t["passed"] is False and t["reason"] == "rank 1: off"
    assert [o["rank"] for o in t["outputs"]] == [0, 1]
    assert merge_correctness([ok, {**ok, "rejections": ["same"]}], "cpu", "float32")["rejections"] == ["same"]
    short = merge_correctness([{**ok, "rejections": []}, {**ok, "rejections": [], "trials": []}], "cpu", "float32")
    assert short["trials"][0]["ranks"][1]["reason"] == "did not run"


class _FakeRank:
    world = 2

    def __init__(self, other_us: float, other_reasons: int = 0):
        self.other_us, self.other_reasons = other_us, other_reasons
        self.barriers = 0

    def barrier(self):
        self.barriers += 1

    def max(self, values):
        other = [self.other_us, float(self.other_reasons & 0xE8), float(self.other_reasons & ~0xE8), -1500.0]
        return [max(a, b) for a, b in zip(values, other)]


class _FakeTimer:
    name, mode, flush_bytes, l2_reset = "fake", "cpu", None, None
    min_block_us = 100.0

    def __init__(self):
        self.calls_per_block = {}

    def call(self, fn):
        return fn()

    def sample(self, side, fn):
        n = self.calls_per_block.get(side, 1)
        return Sample(us=10.0, out=fn(), throttle_reasons=0x1, sm_clock_mhz=1800.0, calls=n)


def test_rank_timer_takes_the_slowest_rank_and_any_throttling():
    rank = _FakeRank(other_us=25.0, other_reasons=0x40)  # the peer is slower and thermally throttled
    t = RankTimer(_FakeTimer(), rank)
    s = t.sample("kernel", lambda: 1)
    assert s.us == 25.0 and s.out == 1
    assert s.throttle_reasons & 0x40
    assert s.sm_clock_mhz == 1500.0  # the lowest clock over ranks
    assert rank.barriers == 1
    # calibration grows the block from the shared time: 25 us x 4 calls >= 100 us
    t.calibrate("kernel", lambda: 1)
    assert t.calls_per_block["kernel"] == 4
