"""ingest, publish and audit judge a record alike (issue 25): what ingest takes, audit accepts; what
audit refuses, publish never shows.

Records are generated from a seed: each is an honest, verified record of one (claim, machine),
changed by zero, one or two of the edits a forger or bad luck makes (a commit the repository lacks,
a git-ignored source, a claimed value edited with the verdict recomputed, a date in the future,
medians 10x off their samples, another GPU, a stale claim hash, a dirty tree, ...). Each record of a
round stands alone on its group, so publish would show it if it stood. The three commands then see
the same files: ingest from an artifact folder, audit and publish from the store they were copied
into as a careless maintainer would (by hand, not through ingest).
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest
import recordkit as rk

from claimbench.report.audit import audit
from claimbench.report.ingest import ingest
from claimbench.report.publish import publish
from claimbench.stats.verdict import decide
from claimbench.store.record import parse_record, write_record

NOW = "2026-12-01T12:00:00.000000Z"
GROUPS = [  # (claim, hardware, build kwargs): each verifies as built
    ("softmax-online", "nvidia-h200", dict(kernel_us=150, baseline_us=243)),
    ("softmax-online", "nvidia-h100", dict(kernel_us=200, baseline_us=304)),
    ("softmax-online", "nvidia-gh200", dict(kernel_us=150, baseline_us=240)),
    ("scan-decoupled", "nvidia-h200", dict(kernel_us=117.6, floor_us=100.0)),
    ("scan-decoupled", "nvidia-h100", dict(kernel_us=110.0, floor_us=100.0)),
    ("transpose-tiled", "nvidia-h200", dict(kernel_us=150, baseline_us=210)),
    ("softmax-online-bw", "nvidia-h200", dict(kernel_us=137.66)),
    ("deepgemm-fp8", "nvidia-h200", dict(kernel_us=1718)),
    ("blackwell-time", "nvidia-b200", dict(kernel_us=12.3)),
]


def _redecide(d: dict) -> None:
    v = decide(parse_record(d, "x").evidence())
    d.update(verdict=v.status.value, reason=v.reason, value=v.value, ci_low=v.ci_low, ci_high=v.ci_high,
             published_value=v.published_value)


def _ignored(root: Path) -> tuple[str, str]:
    return "kernels/build/fast.py", rk.sha256_file(root / "kernels" / "build" / "fast.py")


def _other_gpu(d: dict) -> None:
    hw = d["hardware"]
    slug = "nvidia-b200" if hw["slug"] != "nvidia-b200" else "nvidia-h100"
    name = rk.HARDWARE[slug][0]
    d["hardware"] = {**hw, "slug": slug, "name": name, "gpus": [{**hw["gpus"][0], "name": name}]}


FORGERIES = {  # edit -> (change the record's JSON, given the project root)
    "unknown commit": lambda d, root: d.update(git_commit="%040x" % random.Random(d["seeds"][0]).getrandbits(160)),
    "a commit by a name that moves": lambda d, root: d.update(git_commit="HEAD"),
    "ignored source": lambda d, root: d["source_sha256"].update([_ignored(root)]),
    "claimed value, verdict recomputed": lambda d, root: (d["claimed"].update(value=0.5), _redecide(d)),
    "tolerance, verdict recomputed": lambda d, root: (d["claimed"].update(tolerance=0.45), _redecide(d)),
    "dated 2099": lambda d, root: d.update(created_utc="2099-01-01T00:00:00.000000Z"),
    "medians 10x": lambda d, root: d["kernel"].update(median_us=d["kernel"]["median_us"] / 10),
    "value edited": lambda d, root: d.update(value=(d["value"] or 1.0) * 1.5, published_value=(d["value"] or 1.0) * 1.5),
    "another gpu": lambda d, root: _other_gpu(d),
    "stale claim hash": lambda d, root: d.update(claim_sha256="0" * 64),
    "source hash": lambda d, root: d["source_sha256"].update({"kernels/stubs.py": "1" * 64}),
}
HONEST = {"none": lambda d, root: None, "dirty tree": lambda d, root: d.update(git_dirty=True)}
# a record from a dirty tree never said its files were its commit's: these edits forge nothing there
FILES = {"ignored source", "source hash", "stale claim hash"}


def _round(tmp: Path, seed: int) -> list[tuple[str, list[str], Path]]:
    """One project and one record per group; returns (group, edits, artifact file) per record."""
    rng = random.Random(seed)
    root = rk.copy_tree(tmp / "proj")
    (root / ".gitignore").write_text("kernels/build/\n")
    rk.commit_all(root, "ignore the build folder")
    (root / "kernels" / "build").mkdir()
    (root / "kernels" / "build" / "fast.py").write_text("FAST = True\n")
    out = []
    names = sorted(FORGERIES) + sorted(HONEST)
    for k, (claim, hw, kw) in enumerate(GROUPS):
        first = names[(len(GROUPS) * seed + k) % len(names)]  # seeds 1 and 2 between them use every edit
        edits = [first] + ([rng.choice([n for n in names if n != first])] if rng.random() < 1 / 3 else [])
        rec = rk.build(root, claim, hw=hw, created=f"2026-11-{10 + k:02d}T09:00:00.000000Z", seed=100 * seed + k, **kw)
        assert rec.verdict == "verified", (claim, hw, rec.reason)
        path = write_record(tmp / "artifacts" / f"{k}", rec)
        d = json.loads(path.read_text())
        for e in edits:
            {**FORGERIES, **HONEST}[e](d, root)
        path.write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
        out.append((f"{claim} on {hw}", edits, path))
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_ingest_publish_and_audit_agree(tmp_path, seed):
    cases = _round(tmp_path, seed)
    root = tmp_path / "proj"
    taken = {Path(dest).name for _, dest in ingest(root, [tmp_path / "artifacts"], tmp_path / "ingested").ingested}
    for _, _, path in cases:  # into the store by hand, past ingest
        claim_id = json.loads(path.read_text())["claim_id"]
        dest = root / "results" / "records" / claim_id / path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, dest)
    refused = {Path(p.path).name for p in audit(root, root / "LIST.md", root / "results", cache=False, now=NOW)
               if p.path.startswith("results/records/")}
    plan = publish(root, root / "LIST.md", root / "results", now=NOW)
    shown = {Path(n.record).name for n in plan.numbers}
    for group, edits, path in cases:
        forged = [e for e in edits if e in FORGERIES and not (e in FILES and "dirty tree" in edits)]
        where = f"{group} with {edits}"
        if forged:
            assert path.name in refused, f"audit accepted {where}"
            assert path.name not in taken, f"ingest took {where}"
            assert path.name not in shown, f"publish showed {where}"
        else:
            assert path.name not in refused, f"audit refused an honest record: {where}"
        assert not (path.name in taken and path.name in refused), where
        assert not (path.name in shown and path.name in refused), where
        if edits == ["none"]:
            assert path.name in taken and path.name in shown, f"the honest control: {where}"
