"""Build records for the publish, audit, table, site and provenance tests.

Records are made through the `Record` model with realistic raw samples (60 per side, 12 rounds
of 5) and their verdict comes from `decide()`, so each one is self-consistent and `audit` finds
nothing wrong with it until a test breaks it on purpose. A fixture tree is a git repository with
its claims and kernels committed, and each record names the tree's real HEAD: publish, audit and
ingest check that the commit exists and holds the files the record hashed.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np

from claimbench.gate.srcgraph import named_files
from claimbench.spec import expr
from claimbench.spec.claim import Claim
from claimbench.spec.yamlsafe import load_document
from claimbench.store.claimcopy import claim_copy
from claimbench.store.index import append_index
from claimbench.store.record import (
    MIN_PROTOCOL_VERSION,
    PROTOCOL_VERSION,
    Record,
    sha256_file,
    write_record,
)

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "publish"
HARDWARE = {
    "nvidia-h200": ("NVIDIA H200", 4400.0, {"bfloat16": 790.0, "float8_e4m3fn": 1580.0}),
    "nvidia-h100": ("NVIDIA H100 80GB HBM3", 3000.0, {"bfloat16": 700.0, "float8_e4m3fn": 1400.0}),
    "nvidia-b200": ("NVIDIA B200", 7200.0, {"bfloat16": 2000.0, "float8_e4m3fn": 4000.0}),
    "nvidia-gh200": ("NVIDIA GH200 480GB", 4000.0, {"bfloat16": 790.0}),
}


def copy_tree(dst: Path, *, committed: bool = True) -> Path:
    """A writable copy of the fixture tree (claims, kernels, LIST.md), committed unless told not
    to (a project outside git); results empty."""
    shutil.copytree(FIXTURE, dst, ignore=shutil.ignore_patterns("records_v1", "__pycache__"))
    (dst / "results").mkdir(exist_ok=True)
    if committed:
        git(dst, "init", "-q")
        commit_all(dst, "the fixture project")
    return dst


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=fixture", "-c", "user.email=fixture@example.com",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True).stdout.strip()


def commit_all(root: Path, message: str = "edit") -> str:
    """Commit every change outside results/ (records stay untracked, as a run leaves them); the new HEAD."""
    git(root, "add", "-A", "--", ".", ":!results")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return head(root)


def head(root: Path) -> str:
    return git(root, "rev-parse", "HEAD")


def load_claim(root: Path, claim_id: str) -> Claim:
    return Claim.model_validate(load_document(root / "claims" / f"{claim_id}.yaml").data)


def side(rng, median_us: float, n: int = 60, rounds: int = 12, noise: float = 0.01) -> dict:
    x = median_us * (1 + noise * rng.standard_normal(n))
    q1, q3 = np.percentile(x, [25, 75])
    return {"samples_us": [float(v) for v in x], "rounds": [i * rounds // n for i in range(n)],
            "processes": [0] * n, "dropped_us": [], "median_us": float(np.median(x)),
            "iqr_us": float(q3 - q1)}


def hardware(slug: str) -> dict:
    name = HARDWARE[slug][0]
    return {"device": "cuda", "slug": slug, "name": name,
            "gpus": [{"index": 0, "name": name, "sm_count": 132, "compute_capability": "9.0"}],
            "cpu": {"model": "Fixture CPU", "cores": 2, "threads_used": 1},
            "software": {"python": "3.11", "torch": "2.13", "git_commit": "abc1234", "git_dirty": False}}


def build(root: Path, claim_id: str, *, hw: str = "nvidia-h200", created: str = "2026-11-01T10:00:00.000000Z",
          kernel_us: float = 100.0, baseline_us: float | None = None, seed: int = 0, dirty: bool = False,
          protocol_version: int = PROTOCOL_VERSION, mode: str = "measured", correctness_passed: bool = True,
          floor_us: float | None = None, noise: float = 0.01, **overrides) -> Record:
    """One record for `claim_id` as the runner would write it; the verdict comes from decide()."""
    from claimbench.stats.verdict import decide

    claim = load_claim(root, claim_id)
    params = claim.workload.params
    flops = expr.evaluate(claim.workload.flops, params) if claim.workload.flops else None
    nbytes = expr.evaluate(claim.workload.bytes, params) if claim.workload.bytes else None
    name, bw, mm = HARDWARE[hw]
    rate = mm.get(claim.precision.dtype, max(mm.values()))
    if floor_us is None:
        floor_us = max((nbytes or 0) / bw / 1e3, (flops or 0) / rate / 1e6)
    rng = np.random.default_rng(seed)
    base = side(rng, baseline_us, noise=noise) if baseline_us else {}
    trials = [{"seed": 1000 + seed * 10 + i, "passed": correctness_passed, "reason": "" if correctness_passed else "rel L2 error 0.3 > max_rel_l2 0.01",
               "outputs": [{"shape": [8192, 8192], "dtype": claim.precision.dtype, "rel_l2": 2e-3 * (i + 1),
                            "max_abs_err": 1e-3 * (i + 1), "passed": correctness_passed}]} for i in range(3)]
    fields = dict(
        protocol_version=protocol_version, claim_id=claim_id, created_utc=created, harness_version="0.1.0",
        git_commit=head(root), git_dirty=dirty,
        claim_path=f"claims/{claim_id}.yaml", claim_sha256=sha256_file(root / "claims" / f"{claim_id}.yaml"),
        source_sha256={rel: sha256_file(root / rel) for rel in sorted({"kernels/stubs.py", *named_files(claim)})},
        seeds=[1000 + seed * 10 + i for i in range(3)], hardware=hardware(hw), mode=mode,
        **claim_copy(claim),
        flops=flops, bytes=nbytes, tensor_bytes=(nbytes or 0) * 2 or None,
        protocol={"warmup_s": 1.0, "flush": "l2", "stop_reason": "rse<0.5%", "rounds": 12},
        correctness={"passed": correctness_passed, "reason": trials[0]["reason"], "trials": trials},
        kernel=side(rng, kernel_us, noise=noise), baseline=base,
        ceilings={"bandwidth_gbps": bw, "matrix_tflops": mm}, floor_us=floor_us,
        floor_term="bytes / bandwidth", verdict="error", reason="not decided yet")
    if mode != "measured":
        fields.update(hardware_match=False, hardware_reason=f"needs {claim.hardware.model}, found {name}",
                      kernel={}, baseline={})
    fields.update(overrides)
    rec = Record.model_validate(fields)
    v = decide(rec.evidence())
    return rec.model_copy(update=dict(verdict=v.status.value, reason=v.reason, value=v.value,
                                      ci_low=v.ci_low, ci_high=v.ci_high, published_value=v.published_value))


def write(root: Path, rec: Record) -> Path:
    """Write as the runner does: the record, then its index line."""
    results = root / "results"
    path = write_record(results, rec)
    append_index(results, path, rec)
    return path


def standard(root: Path) -> dict[str, Path]:
    """The records the golden tests use; each scenario is named by its key."""
    R = {}
    R["softmax_h200_old"] = write(root, build(root, "softmax-online", created="2026-10-01T09:00:00.000000Z", kernel_us=150, baseline_us=232, seed=1))
    R["softmax_h200"] = write(root, build(root, "softmax-online", created="2026-11-02T09:00:00.000000Z", kernel_us=150, baseline_us=243, seed=2))
    R["softmax_h100"] = write(root, build(root, "softmax-online", hw="nvidia-h100", created="2026-10-20T09:00:00.000000Z", kernel_us=200, baseline_us=304, seed=3))
    R["softmax_cpu_skip"] = write(root, build(root, "softmax-online", hw="nvidia-gh200", created="2026-11-03T09:00:00.000000Z", mode="correctness-only", seed=4))
    R["bw_h200"] = write(root, build(root, "softmax-online-bw", created="2026-10-15T09:00:00.000000Z", kernel_us=137.66, seed=5))
    R["gemm_h200"] = write(root, build(root, "deepgemm-fp8", created="2026-10-10T09:00:00.000000Z", kernel_us=1718, seed=6))
    R["gemm_h200_dirty"] = write(root, build(root, "deepgemm-fp8", created="2026-10-12T09:00:00.000000Z", kernel_us=2500, seed=7, dirty=True))
    R["scan_h200"] = write(root, build(root, "scan-decoupled", created="2026-10-05T09:00:00.000000Z", kernel_us=117.6, floor_us=100.0, seed=8))
    R["scan_h100_oldproto"] = write(root, build(root, "scan-decoupled", hw="nvidia-h100", created="2026-10-06T09:00:00.000000Z", kernel_us=110, floor_us=100.0, seed=9, protocol_version=MIN_PROTOCOL_VERSION - 1))
    R["blackwell_b200"] = write(root, build(root, "blackwell-time", hw="nvidia-b200", created="2026-10-07T09:00:00.000000Z", kernel_us=12.3, seed=10))
    R["transpose_old"] = write(root, build(root, "transpose-tiled", created="2026-09-01T09:00:00.000000Z", kernel_us=150, baseline_us=210, seed=11))
    R["transpose_new"] = write(root, build(root, "transpose-tiled", created="2026-10-01T09:00:00.000000Z", kernel_us=150, baseline_us=160, seed=12))
    R["softmax_gh200_stale"] = write(root, older_claim(root, "softmax-online", hw="nvidia-gh200", created="2026-10-25T09:00:00.000000Z", kernel_us=150, baseline_us=240, seed=13))
    return R


def older_claim(root: Path, claim_id: str, **kw) -> Record:
    """A record made at an earlier commit whose claim file differed (a comment more): at HEAD its
    claim hash is stale, at its own commit everything matches."""
    path = root / "claims" / f"{claim_id}.yaml"
    now = path.read_bytes()
    path.write_bytes(now + b"# an earlier version of this claim\n")
    commit_all(root, "an earlier claim")
    rec = build(root, claim_id, **kw)
    path.write_bytes(now)
    commit_all(root, "the claim as it is now")
    return rec


_TEMPLATE: list = []


def standard_tree(dst: Path) -> tuple[Path, dict[str, Path]]:
    """`copy_tree` + `standard`, built once per test session and copied (mtimes kept, so the
    index stays valid) into `dst` for each test."""
    import atexit
    import tempfile

    if not _TEMPLATE:
        base = Path(tempfile.mkdtemp(prefix="claimbench-template-"))
        atexit.register(shutil.rmtree, base, True)
        root = copy_tree(base / "proj")
        _TEMPLATE.append((root, standard(root)))
    root, recs = _TEMPLATE[0]
    shutil.copytree(root, dst)
    return dst, {k: dst / p.relative_to(root) for k, p in recs.items()}


V1_NAME = "20261105T090000Z-nvidia-h200-00000000a1.json"


def make_v1_fixture() -> Path:
    """Regenerate fixtures/publish/records_v1/ (a schema_version 1 record). Its hashes pin the
    fixture's claim and kernel files: rerun this after editing them."""
    import json

    rec = build(FIXTURE, "softmax-online", created="2026-11-05T09:00:00.000000Z", kernel_us=150, baseline_us=250, seed=21)
    d = rec.model_dump(mode="json")
    d["schema_version"] = 1
    d["status"] = d.pop("verdict")
    for name in ("kernel", "baseline"):
        d[name].pop("processes")
    for name in ("hardware_spec", "workload"):
        d.pop(name)
    out = FIXTURE / "records_v1" / "softmax-online" / V1_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
    return out
