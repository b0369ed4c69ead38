"""audit: one fixture per failure, each caught with a located message; a clean tree passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import recordkit as rk

from claimbench.report.audit import audit, check_record, fingerprint
from claimbench.report.publish import publish
from claimbench.store.record import SCHEMA_VERSION, load_record


@pytest.fixture
def tree(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    publish(root, root / "LIST.md", root / "results")
    return root, recs


def run(root, **kw):
    return audit(root, root / "LIST.md", root / "results", **kw)


def edit_record(path, **changes):
    d = json.loads(path.read_text())
    for key, value in changes.items():
        target = d
        *parents, last = key.split(".")
        for p in parents:
            target = target[p]
        target[last] = value
    path.write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")


def edit_list(root, old, new):
    lst = root / "LIST.md"
    text = lst.read_text(encoding="utf-8")
    assert old in text
    lst.write_text(text.replace(old, new, 1), encoding="utf-8")


def messages(problems):
    return [str(p) for p in problems]


def test_clean_tree_passes_cold_and_warm(tree):
    root, _ = tree
    assert run(root, cache=False) == []
    assert run(root) == []
    assert list((root / "results" / ".cache").glob(f"audit-{fingerprint()}.jsonl"))
    assert run(root) == []


def test_a_damaged_cache_line_costs_only_its_record(tree):
    """The cache is parsed in one go; a damaged line (a killed write) falls back to line by line,
    and only its record is checked again: the warm answer is the cold one."""
    from claimbench.store import auditcache

    root, _ = tree
    assert run(root) == []
    (cache,) = (root / "results" / ".cache").glob(f"audit-{fingerprint()}.jsonl")
    lines = cache.read_bytes().splitlines(keepends=True)
    assert len(auditcache.load(cache).by_sha) == len(lines) > 2
    cache.write_bytes(b"".join(lines[:1] + [lines[1][:17] + b"\n"] + lines[2:]))
    assert len(auditcache.load(cache).by_sha) == len(lines) - 1
    assert run(root) == []


def test_hand_edit_inside_marker(tree):
    root, _ = tree
    edit_list(root, "-->1.62× [1.61, 1.63] vs torch.softmax", "-->1.72× [1.61, 1.63] vs torch.softmax")
    (p,) = run(root)
    assert p.path == "LIST.md" and p.line == 11
    assert p.key == "Foundational kernel exercises > Online Normalizer Calculation for Softmax"
    assert "hand-edited text inside the markers" in p.message and "1.72×" in p.message


@pytest.mark.parametrize(("content", "phrase"), [
    ("2.10× vs torch.sum · H200 · fp32", "no current verified record backs a number here"),
    # resolving a link with a NUL byte raises ValueError: audit names it, never a traceback
    ("2.10× [record](x\x00y)", "it links 'x\\x00y', which is not a record in results"),
])
def test_number_no_record_backs(tree, content, phrase):
    root, _ = tree
    edit_list(root, "hand-written text stays.",
              "hand-written text stays. <!-- claimbench:Foundational kernel exercises > Optimizing Parallel "
              f"Reduction in CUDA -->{content}<!-- /claimbench -->")
    problems = run(root)
    (p,) = [p for p in problems if phrase in p.message]
    assert (p.path, p.line) == ("LIST.md", 12)
    # the NUL byte is named too: a control character changes what the line shows (spec/listhazards.py)
    assert [h.message[:19] for h in problems if h is not p] == (["holds U+0000 contro"] if "\x00" in content else [])


def test_number_linking_a_refuted_record(tree):
    root, recs = tree
    rel = recs["transpose_new"].relative_to(root).as_posix()
    edit_list(root, "both coalesce.", f"both coalesce. <!-- claimbench:Foundational kernel exercises > "
                                      f"Efficient Matrix Transpose in CUDA C/C++ -->1.07× · H200 · [record]({rel})<!-- /claimbench -->")
    (p,) = run(root)
    assert p.line == 9 and "no current verified record backs" in p.message and "is refuted, not verified" in p.message


def test_stale_hash_of_a_record_the_list_uses(tree):
    root, _ = tree
    claim = root / "claims" / "deepgemm-fp8.yaml"
    claim.write_text(claim.read_text().replace("title: Fixture claim", "title: Edited fixture claim"))
    (p,) = run(root)
    assert p.key == "Matrix multiplication > DeepGEMM"
    assert "stale hash: claims/deepgemm-fp8.yaml changed since the run" in p.message


def test_corrupt_json_fails_and_is_named(tree):
    root, recs = tree
    recs["scan_h100_oldproto"].write_text('{"schema_version": 2, "claim_id": "scan-dec')
    (p,) = run(root)
    assert p.path.endswith(recs["scan_h100_oldproto"].name) and p.key == "record"
    assert "corrupt or truncated JSON" in p.message


def test_schema_failure(tree):
    root, recs = tree
    edit_record(recs["transpose_old"], surprise_field=1)
    (p,) = run(root)
    assert p.key == "record" and "surprise_field" in p.message


def test_newer_schema_is_refused(tree):
    root, recs = tree
    edit_record(recs["transpose_old"], schema_version=SCHEMA_VERSION + 1)
    (p,) = run(root)
    assert f"schema_version {SCHEMA_VERSION + 1} is newer than this claimbench reads" in p.message


def test_published_value_on_a_non_verified_record(tree):
    root, recs = tree
    edit_record(recs["transpose_new"], published_value=1.07)
    problems = run(root)
    assert [p.key for p in problems] == ["published_value", "published_value"]
    assert "only verified records carry one" in problems[0].message
    assert "recomputing gives None" in problems[1].message


def test_verified_record_whose_correctness_failed(tree):
    root, recs = tree
    edit_record(recs["bw_h200"], **{"correctness.passed": False})
    keys = {p.key: p.message for p in run(root)}
    assert "correctness.passed is False" in keys["correctness"]
    assert "gives incorrect" in keys["verdict"]


def test_hand_edited_record_value(tree):
    root, recs = tree
    rec = load_record(recs["gemm_h200"])
    edit_record(recs["gemm_h200"], value=rec.value * 1.1, published_value=rec.value * 1.1)
    problems = run(root)
    assert {p.key for p in problems} >= {"value", "published_value"}
    assert all("edited by hand" in p.message for p in problems if p.key in ("value", "published_value"))
    assert any(p.path == "LIST.md" and p.key == "Matrix multiplication > DeepGEMM" for p in problems)


def test_hand_edited_verdict_is_caught_even_with_a_warm_cache(tree):
    root, recs = tree
    assert run(root) == []  # warms the cache
    rec = load_record(recs["transpose_new"])
    edit_record(recs["transpose_new"], verdict="verified", published_value=rec.value)
    problems = run(root)
    verdict = [p for p in problems if p.key == "verdict"]
    assert verdict and "says verified, but recomputing" in verdict[0].message and "gives refuted" in verdict[0].message


def test_claim_referenced_by_the_list_fails_check(tree):
    root, _ = tree
    edit_list(root, "- DeepGEMM - A small", "- DeepGEMM library - A small")
    problems = run(root)
    claim = [p for p in problems if p.path == "claims/deepgemm-fp8.yaml"]
    assert claim and claim[0].key == "entry" and "names no entry" in claim[0].message
    assert any(p.path == "LIST.md" and "marker key" in p.message for p in problems)


def test_record_filed_under_another_claim(tree):
    root, recs = tree
    src = recs["gemm_h200"]
    shutil.move(src, recs["scan_h200"].parent / src.name)
    problems = run(root)
    assert any(p.key == "claim_id" and "does not match its folder" in p.message for p in problems)


def test_unreadable_list_is_one_located_problem(tree):
    root, _ = tree
    edit_list(root, "hand-written text stays.", "hand-written text stays. <!-- claimbench:x -->1.2×")
    problems = run(root)
    assert [(p.path, p.line, p.key) for p in problems] == [("LIST.md", 12, "list")]
    assert "unclosed" in problems[0].message


def test_a_record_path_outside_the_markers_in_any_syntax_is_a_located_problem(tree):
    """GitHub renders a raw HTML link, an autolink and a bare URL as links too: outside the regions,
    any mention of the records folder is a number nobody checks. As code, in prose, it is text."""
    root, rel, problems = _outside(tree, lambda rel: (
        f'<a href="{rel}">1580 TFLOP/s</a>\n'
        "  bare https://github.com/o/r/blob/main/results/records/x.json\n"
        "  and <https://example.org/results/records/y.json>\n"
        "  records live under `results/records/`, as code\n"))
    assert sorted({p.line for p in problems}) == [13, 14, 15], [str(p) for p in problems]
    assert all("outside the markers" in p.message for p in problems)  # the raw HTML too (spec/listhazards.py)


def _outside(tree, lines):
    """The list with ``lines(record path)`` added after line 12, and what audit says of it, all located
    on LIST.md as list problems."""
    root, recs = tree
    rel = recs["transpose_new"].relative_to(root).as_posix()
    edit_list(root, "hand-written text stays.\n", "hand-written text stays.\n" + lines(rel))
    problems = run(root)
    assert all((p.path, p.key) == ("LIST.md", "list") for p in problems), [str(p) for p in problems]
    return root, rel, problems


def test_a_record_link_outside_the_markers_is_a_located_problem(tree):
    """A number and its record link on a continuation line, or a reference definition, is not in
    any region, so no region check sees it: audit reports each link into the results folder."""
    root, rel, problems = _outside(tree, lambda rel: (
        f"1580 TFLOP/s · H200 · fp8 · [record]({rel})\n"
        "  also [r][1] and [on GitHub](https://github.com/o/r/blob/main/results/records/x.json \"t\")\n"
        "  shown as code, not a link: `[record](results/records/y.json)`\n\n"
        "[1]: ./results/records/z.json\n"))
    links = [p for p in problems if "a record link outside the markers" in p.message]
    assert [p.line for p in links] == [13, 14, 17] and all("claimbench publish" in p.message for p in links)
    assert rel in links[0].message and "results/records/z.json" in links[2].message
    # and the definition itself, whatever it links (spec/listhazards.py)
    assert [p.line for p in problems if p not in links] == [17]


def test_migrated_record_audits_clean(tree):
    root, recs = tree
    src = rk.FIXTURE / "records_v1" / "softmax-online"
    for f in src.iterdir():  # made at this project's commit, as a migrated record of its own store is
        d = json.loads(f.read_text())
        d["git_commit"] = rk.head(root)
        d["claim_sha256"] = rk.sha256_file(root / d["claim_path"])  # its claim as committed there
        (root / "results" / "records" / "softmax-online" / f.name).write_text(json.dumps(d, indent=1, sort_keys=True) + "\n")
    # the migrated record reads and checks clean; its protocol (3) is below the minimum (4), so it
    # neither supersedes the number the list shows nor asks to be published
    assert run(root) == []
    publish(root, root / "LIST.md", root / "results")
    assert run(root) == []


def test_check_record_flags_nothing_on_a_built_record():
    root = rk.FIXTURE
    assert check_record(rk.build(root, "softmax-online", kernel_us=150, baseline_us=240)) == []
    assert check_record(rk.build(root, "softmax-online", kernel_us=150, baseline_us=240,
                                 correctness_passed=False)) == []


def test_data_layer_imports_no_gpu_stack_nor_pandas():
    import subprocess
    import sys

    code = ("import sys, claimbench.report.publish, claimbench.report.audit, claimbench.store.index, claimbench.gate.gatecache, "
            "claimbench.store.provenance, claimbench.cli; claimbench.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'triton', 'cupy', 'pandas', 'matplotlib') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("change,key,phrase", [
    # a record saying it ran on a GPU its claim would not accept (device: cpu claims too)
    (lambda r: r.model_copy(update={"hardware": {**r.hardware, "gpus": [{**r.hardware["gpus"][0],
                                                                          "name": "NVIDIA A100-SXM4-80GB"}]}}),
     "hardware", "but it ran on NVIDIA A100"),
    # every command judges a date against its own clock (standing.future_problem): "cannot come from the future"
    (lambda r: r.model_copy(update={"created_utc": "2099-01-01T00:00:00.000000Z"}), "created_utc", "the future"),
    # no hardware block at all skipped the hardware check (an adversarial review, 2026-12-06)
    (lambda r: r.model_copy(update={"hardware": {}}), "hardware", "names no hardware"),
    # the device the verdict's rules read, not the claim's: a CUDA claim's record "measured" on a CPU
    (lambda r: r.model_copy(update={"protocol": {**r.protocol, "device": "cpu"}}), "protocol.device",
     "ran its sides on 'cpu', not the claim's 'cuda'"),
    (lambda r: r.model_copy(update={"kernel": r.kernel.model_copy(update={"median_us": 10 * r.kernel.median_us})}),
     "kernel.median_us", "samples' median"),
    # the claim's blocks set to null, as only a migrated schema-2 record has them: the hardware check
    # was skipped, and a CPU claim's number was published as an H100's (an adversarial review)
    (lambda r: r.model_copy(update={"hardware_spec": None, "workload": None,
                                    "hardware": {**r.hardware, "gpus": [{**r.hardware["gpus"][0], "name": "NVIDIA A100"}]}}),
     "hardware_spec", "removed by hand"),
])
def test_a_record_its_own_bytes_contradict_is_refused_by_audit_publish_and_ingest(tmp_path, change, key, phrase):
    """Issue 25: one judgement. Each forgery passed audit (and reached the list) before."""
    import subprocess

    from claimbench.report.ingest import ingest
    from claimbench.store.record import write_record

    root, _ = rk.standard_tree(tmp_path / "proj")
    (root / ".gitignore").write_text("results/\n")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    good = rk.build(root, "softmax-online", created="2026-11-20T09:00:00.000000Z", kernel_us=100, baseline_us=300,
                    seed=77, git_commit=head)
    bad = change(good)
    assert check_record(good) == []
    if key != "created_utc":  # a date is judged against each command's own clock, never cached with the bytes
        assert any(k == key and phrase in m for k, m in check_record(bad)), check_record(bad)
    outside = tmp_path / "artifacts"
    write_record(outside / "good", good)
    write_record(outside / "bad", bad)
    report = ingest(root, [outside / "good", outside / "bad"], root / "results")
    assert len(report.ingested) == 1 and len(report.refused) == 1, report
    assert report.refused[0].key == key and phrase in report.refused[0].message, report.refused[0]
    path = rk.write(root, bad)  # placed by hand: audit names it, publish never shows it
    plan = publish(root, root / "LIST.md", root / "results", dry_run=True)
    assert path.name not in plan.new_text
    assert any(key in m and path.name in m for m in messages(run(root, cache=False)))


def test_a_future_date_is_judged_against_the_clock_of_each_audit_not_the_cache(tree):
    """A record dated ahead of the clock is refused; once that time has passed it stands, cache or
    not. The record check (cached by sha256) also refused dates more than a day ahead, against the
    clock of the run that filled the cache, so a warm audit kept refusing it after the date passed."""
    from datetime import datetime, timedelta, timezone

    root, _ = tree
    ahead = datetime.now(timezone.utc) + timedelta(days=2)
    rec = rk.build(root, "softmax-online", created=ahead.strftime("%Y-%m-%dT%H:%M:%S.000000Z"), kernel_us=100,
                   baseline_us=300, seed=91)
    path = rk.write(root, rec)
    assert any("created_utc" in m and "future" in m and path.name in m for m in messages(run(root)))  # cache filled
    later = (ahead + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    for cache in (True, False):
        assert not [m for m in messages(run(root, cache=cache, now=later)) if "future" in m], cache


def _forge_cache(root, record_path):
    """Rewrite the audit cache so the line for ``record_path`` says it has no problems: what an
    attacker who can put files in the clone would commit beside a forged record."""
    import hashlib

    (cache,) = (root / "results" / ".cache").glob(f"audit-{fingerprint()}.jsonl")
    sha = hashlib.sha256(record_path.read_bytes()).hexdigest()
    lines = []
    for line in cache.read_text().splitlines():
        d = json.loads(line)
        if d[0] == sha:
            d[4] = []
        lines.append(json.dumps(d))
    cache.write_text("\n".join(lines) + "\n")


def test_a_cache_the_repository_carries_is_never_trusted(tree, tmp_path):
    """A forged record with a forged audit cache committed beside it (`git add -f`), cloned as CI
    clones: audit must find the forgery and name the committed cache; a cache is local state,
    never evidence."""
    import subprocess

    root, recs = tree
    rec = load_record(recs["gemm_h200"])
    edit_record(recs["gemm_h200"], value=rec.value * 1.1, published_value=rec.value * 1.1)
    assert {p.key for p in run(root)} >= {"value"}  # writes the cache, with the record's problems
    _forge_cache(root, recs["gemm_h200"])
    assert not {p.key for p in run(root)} & {"value", "published_value"}  # the local cache is trusted...
    rk.git(root, "add", "-f", "results")
    rk.commit_all(root, "forged record and cache")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(root), str(clone)], check=True)
    problems = run(clone)
    assert {p.key for p in problems} >= {"value", "published_value"}
    committed = [p for p in problems if p.key == "cache"]
    assert committed and "git rm -r --cached" in committed[0].message
    plan = publish(clone, clone / "LIST.md", clone / "results", dry_run=True)
    assert plan.failed and plan.carried and any("ignored results/.cache/" in line for line in plan.lines())
    assert any(path.endswith("gemm_h200.json") or "gemm" in path for path, _, _ in plan.refused)


def test_a_record_with_a_key_twice_is_refused_by_audit_publish_and_ingest(tmp_path):
    """A file whose first "value" says 10x while the last (the one JSON parsers here keep) is the
    checked one: a person opening the record read one number and the list showed another.
    Before, audit passed it and publish showed it."""
    from claimbench.report.ingest import ingest
    from claimbench.store.record import record_json

    root, _ = rk.standard_tree(tmp_path / "proj")
    good = rk.build(root, "softmax-online", created="2026-11-20T09:00:00.000000Z", kernel_us=150, baseline_us=300,
                    seed=78)
    assert good.verdict == "verified"
    path = rk.write(root, good)
    publish(root, root / "LIST.md", root / "results")
    assert path.name in (root / "LIST.md").read_text() and run(root, cache=False) == []
    raw = record_json(good).encode("utf-8")
    forged = raw.replace(b"{\n", f'{{\n "value": {10 * good.value!r},\n'.encode(), 1)
    assert json.loads(forged)["value"] == good.value  # what the checker reads; the eye reads 10x first
    path.write_bytes(forged)
    found = [m for m in messages(run(root, cache=False)) if path.name in m]
    assert any("'value' appears twice" in m for m in found), found
    plan = publish(root, root / "LIST.md", root / "results", dry_run=True)
    assert path.name not in plan.new_text
    outside = tmp_path / "artifacts" / "softmax-online"
    outside.mkdir(parents=True)
    (outside / path.name).write_bytes(forged)
    report = ingest(root, [outside / path.name], root / "results")
    assert not report.ingested and "appears twice" in report.refused[0].message, report


def test_a_relative_root_is_judged_as_its_absolute_path(tree, monkeypatch):
    """The API with root "." (the CLI resolves its --root): before, no claim file was found, so
    every record was refused as "no claim file" and publish took every number off."""
    root, _ = tree
    monkeypatch.chdir(root)
    here = Path(".")
    assert run(here, cache=False) == []
    plan = publish(here, here / "LIST.md", here / "results", dry_run=True)
    assert plan.new_text == (root / "LIST.md").read_text(encoding="utf-8")


def test_a_record_whose_processes_are_lopsided_is_refused_not_bootstrapped_for_minutes():
    """Its verdict cannot be recomputed at a cost its size explains (stats/resample.py `_drawable`),
    so it is a problem, named, instead of an audit that accepts it after 33 s (adversarial review)."""
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    sides = {}
    for name in ("kernel", "baseline"):
        t = getattr(rec, name)
        xs = [t.samples_us[i % len(t.samples_us)] for i in range(600)]  # 300 rounds, then 300 processes of one
        sides[name] = t.model_copy(update={"samples_us": xs, "rounds": list(range(300)) + [0] * 300,
                                           "processes": [0] * 300 + list(range(1, 301))})
    bad = rec.model_copy(update=sides)
    assert any(k == "verdict" and "a resample would draw" in m for k, m in check_record(bad)), check_record(bad)


def test_a_verified_cpu_record_without_the_protocol_8_figures_was_relabelled():
    """A protocol-5 CPU record relabelled 8 with a one-character edit was published with `audit` clean (an
    adversarial review): every CPU run of protocol 8 or later counts interrupts and times the refresh null
    calls before it can verify, so a verified CPU record without those figures is refused."""
    good = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    cpu = {**good.protocol, "device": "cpu"}
    figures = {"irq": {"kernel": 10, "baseline": 11}, "irq_wall_us": {"kernel": 9e4, "baseline": 9e4},
               "refresh": {"kernel": {"median_us": 50.0}, "baseline": {"median_us": 48.0}}}
    keys = lambda r: {k for k, _ in check_record(r)}  # noqa: E731
    assert "protocol.bracket" in keys(good.model_copy(update={"protocol": cpu}))
    assert "protocol.bracket" not in keys(good.model_copy(update={"protocol": {**cpu, "bracket": figures}}))
    assert "protocol.bracket" not in keys(good.model_copy(update={"protocol": cpu, "protocol_version": 7}))
    assert "protocol.bracket" not in keys(good)  # a GPU record: neither rule applies there
