"""Multi-rank claims on CPU, through torch's launcher and the one measurement path.

2 gloo ranks end to end; a wrong rank, a failing rank, a hanging rank; 2 nodes of 1 process on
localhost (static rendezvous), one of them killed. Every rank runs the same orchestrator as a
single-rank claim; these tests check what is particular to several: agreement, merging, teardown.
"""

from __future__ import annotations

import json
import os
import socket
import threading
from pathlib import Path
from typing import Optional

import pytest

from claimbench.gate.policy import gate_file
from claimbench.orchestrator import census
from claimbench.orchestrator.job import ClaimRun, Correctness, Job
from claimbench.orchestrator.launch import Nodes, launch
from claimbench.orchestrator.ranked import merge_correctness, tagged
from claimbench.orchestrator.seeds import draw_seeds

DIST = Path(__file__).resolve().parents[1] / "fixtures" / "distributed"  # its own root: claims/, kernels/, LIST.md
GLOO_CLAIM = DIST / "claims" / "allreduce-gloo.yaml"
FAST = {"warmup_s": 0.05, "max_time_s": 0.5, "min_samples": 10}


def _job(root: Path, claim_path: Path, tmp: Path, *, measured=True, impl=None, trials=2, check_params=None,
         timeout_s=120.0) -> Job:
    claim = gate_file(claim_path, root).claim
    assert claim is not None
    update = {}
    if impl:
        update["kernel"] = claim.kernel.model_copy(update={"impl": impl})
    if check_params is not None:
        update["workload"] = claim.workload.model_copy(update={"check_params": check_params})
    claim = claim.model_copy(update=update)
    return Job(claim=claim, root=root, device="cpu", dtype="float32", measured=measured, seeds=draw_seeds(trials),
               timing=FAST, timeout_s=timeout_s, log_path=tmp / "claim.log", threads=1)


def _launch(job: Job, nodes: Optional[Nodes] = None) -> ClaimRun:
    return launch(job, job.claim.hardware.count, nodes or Nodes(), sandbox="none", run_id="test")


def test_two_rank_gloo_claim_end_to_end(tmp_path):
    """Through the runner: one record, every rank's outputs checked, the topology kept."""
    from claimbench.machine.detect import detect
    from claimbench.options import RunOptions, TimingLimits
    from claimbench.runner import run_one
    from claimbench.store.record import Record

    hw = detect(DIST, with_gpu=False)
    out = run_one(GLOO_CLAIM, DIST, hw, opts=RunOptions(results=tmp_path, timeout_s=180, timing=TimingLimits(**FAST), threads=1))
    assert out.status.is_timing, out.reason  # verified, refuted or inconclusive: a measured number
    rec = Record.model_validate(json.loads(out.record_path.read_text()))
    assert rec.correctness["passed"] is True
    assert "each of 2 ranks" in rec.correctness["reason"]
    first = rec.correctness["trials"][0]
    assert sorted(o["rank"] for o in first["outputs"]) == [0, 1]
    assert [r["seed"] for r in first["ranks"]] == [first["seed"], first["seed"] + 1]
    assert rec.protocol["topology"]["world_size"] == 2 and rec.protocol["topology"]["backend"] == "gloo"
    assert rec.protocol["timed_checks"]["checked"] > 0 and rec.protocol["timed_checks"]["failed"] == 0
    assert "max over 2 ranks" in rec.protocol["timer"]


def test_a_wrong_answer_on_one_rank_is_incorrect_and_names_the_rank(tmp_path, monkeypatch):
    """And the launch leaves no folder in the temporary folder: before, torch's launcher left a
    `torchelastic_*` folder there after every multi-rank claim (its default log folder)."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    res = _launch(_job(DIST, GLOO_CLAIM, tmp_path, impl="kernels/dist_sum_kernel.py:wrong_on_rank1", trials=1))
    assert res.outcome is None, res.outcome_reason
    corr = res.correctness
    assert corr is not None and corr.passed is False and corr.reason.startswith("rank 1:")
    assert [r["passed"] for r in corr.trials[0]["ranks"]] == [True, False]
    assert not res.timing
    assert sorted(p.name for p in scratch.iterdir()) == []


def test_a_failing_rank_gives_error_with_its_message(tmp_path):
    res = _launch(_job(DIST, GLOO_CLAIM, tmp_path, impl="kernels/dist_sum_kernel.py:raises_on_rank1"))
    assert res.outcome == "error", res
    assert "rank 1" in res.outcome_reason and "rank 1 refuses to reduce" in res.outcome_reason
    log = (tmp_path / "claim.log").read_text()
    assert "===== launcher =====" in log and "rank 1 refuses" in log  # every rank's output is kept


@pytest.mark.slow
def test_a_hanging_rank_is_a_timeout_and_every_process_is_reaped(tmp_path):
    before = set(census.all_stats())
    res = _launch(_job(DIST, GLOO_CLAIM, tmp_path, impl="kernels/dist_sum_kernel.py:hangs_on_rank1", timeout_s=8.0))
    assert res.outcome in ("timeout", "error"), res
    assert "rank" in res.outcome_reason
    left = [p for p in census.children(os.getpid()) if p not in before]
    assert not left, left


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_nodes(tmp_path: Path, impl=None) -> list[ClaimRun]:
    """2 gloo ranks as 2 nodes of 1 process on localhost, each node its own launcher."""
    port = _free_port()
    claim = gate_file(GLOO_CLAIM, DIST).claim
    claim = claim.model_copy(update={"hardware": claim.hardware.model_copy(update={"nodes": 2})})
    results: list = [None, None]

    def node(k: int) -> None:
        job = _job(DIST, GLOO_CLAIM, tmp_path / f"node{k}", impl=impl)
        job = Job(**{**job.__dict__, "claim": claim if impl is None else claim.model_copy(
            update={"kernel": job.claim.kernel})})
        (tmp_path / f"node{k}").mkdir(exist_ok=True)
        results[k] = launch(job, 2, Nodes(2, k, "127.0.0.1", port), sandbox="none", run_id="two-nodes")

    threads = [threading.Thread(target=node, args=(k,)) for k in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    return results


def test_two_nodes_of_one_rank_each_through_the_launcher(tmp_path):
    node0, node1 = _two_nodes(tmp_path)
    assert node0.outcome is None, node0.outcome_reason
    assert node0.topology["nodes"] == 2 and node0.topology["world_size"] == 2
    assert node0.correctness is not None and node0.correctness.passed is True, node0.correctness
    assert node1.outcome == "error" and "node 0" in node1.outcome_reason  # only rank 0's node writes


def test_a_killed_rank_on_another_node_ends_as_error_and_nothing_hangs(tmp_path):
    before = set(census.all_stats())
    node0, node1 = _two_nodes(tmp_path, impl="kernels/dist_sum_dies.py:dies_on_rank1")
    assert node0.outcome == "error" and node1.outcome == "error", (node0, node1)
    left = [p for p in census.children(os.getpid()) if p not in before]
    assert not left, left


def test_merge_names_the_rank_that_failed_and_keeps_shared_rejections_once():
    ok = Correctness(passed=True, reason="",
                     trials=({"seed": 5, "params": {"n": 1}, "dtype": "float32", "passed": True, "reason": "",
                              "outputs": [{"rel_l2": 0.0, "passed": True}]},))
    bad = Correctness(passed=False, reason="trial 1: off",
                      trials=({"seed": 6, "params": {"n": 1}, "dtype": "float32", "passed": False, "reason": "off",
                               "outputs": [{"rel_l2": 1.0, "passed": False}]},))
    assert tagged([["same"], ["same", "only here"]]) == ["same", "rank 1: only here"]
    m = merge_correctness([ok, bad], "cpu", "float32")
    t = m.trials[0]
    assert m.passed is False and t["passed"] is False and t["reason"] == "rank 1: off"
    assert [o["rank"] for o in t["outputs"]] == [0, 1]
    assert merge_correctness([ok, bad], "cpu", "float32", rejections=["x"]).passed is None  # rejections outrank pass/fail
    short = merge_correctness([ok, Correctness(passed=True)], "cpu", "float32")
    assert short.trials[0]["ranks"][1]["reason"] == "did not run"


def test_hardware_count_must_divide_over_nodes():
    from pydantic import ValidationError

    from claimbench.spec.claim import HardwareSpec

    with pytest.raises(ValidationError, match="divide"):
        HardwareSpec(device="cpu", model=["*"], count=3, nodes=2)
