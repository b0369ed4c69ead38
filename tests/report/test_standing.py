"""Which records stand: one judgement for publish and audit. Each forged, misplaced or impossible
record of issue 12 is refused by both: publish never shows its number (and exits 1), audit names
the record and the field, and audit never asks for the forged number to be published."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.report.audit import audit
from claimbench.report.publish import plan, publish
from claimbench.stats.verdict import decide
from claimbench.store.record import load_record

NOW = "2026-12-01T12:00:00.000000Z"


@pytest.fixture
def tree(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    publish(root, root / "LIST.md", root / "results", now=NOW)
    return root, recs


def rel(root, path):
    return path.relative_to(root / "results").as_posix()


def edit(path, fn):
    d = json.loads(path.read_text())
    fn(d)
    path.write_text(json.dumps(d, indent=1) + "\n")


def redecide(d):
    """Make an edited record self-consistent again, as a careful forger would."""
    from claimbench.store.record import parse_record

    v = decide(parse_record(d, "x").evidence())
    d.update(verdict=v.status.value, reason=v.reason, value=v.value, ci_low=v.ci_low, ci_high=v.ci_high,
             published_value=v.published_value)


def run_both(root):
    p = publish(root, root / "LIST.md", root / "results", now=NOW)
    problems = audit(root, root / "LIST.md", root / "results", cache=False, now=NOW)
    return p, problems, (root / "LIST.md").read_text(encoding="utf-8")


def assert_refused_everywhere(root, path, key, phrase, text_absent):
    p, problems, listed = run_both(root)
    r = rel(root, path)
    assert text_absent not in listed
    assert p.failed and any(x[0] == r for x in p.refused)
    assert any(line.startswith(f"  ! refused results/{r}: ") for line in p.lines())
    mine = [x for x in problems if x.path == f"results/{r}"]
    assert any(x.key == key and phrase in x.message for x in mine), [str(x) for x in mine]
    assert not [x for x in problems if "lacks the number from" in x.message and r in x.message]
    return p, problems


def test_record_whose_claimed_block_was_edited_is_refused(tree):
    """Refuted 1.07x against a claimed 1.3: claimed.value edited to 0.5, verdict recomputed."""
    root, recs = tree
    path = recs["transpose_new"]

    def forge(d):
        d["claimed"]["value"] = 0.5
        redecide(d)
    edit(path, forge)
    assert load_record(path).verdict == "verified"
    assert_refused_everywhere(root, path, "claimed.value", "the record says 0.5, but claims/transpose-tiled.yaml",
                              "1.07×")


@pytest.mark.parametrize("field, value", [
    ("hardware_spec.model", ["*"]),
    ("workload.params.n", 1024),
    ("precision.dtype", "float32"),
    ("claimed.tolerance", 0.5),
])
def test_every_copied_field_must_equal_the_claim_file(tree, field, value):
    root, recs = tree
    path = recs["softmax_h200"]

    def forge(d):
        *parents, last = field.split(".")
        target = d
        for p in parents:
            target = target[p]
        target[last] = value
        redecide(d)
    edit(path, forge)
    assert_refused_everywhere(root, path, field, "the claim file whose hash it carries", "1.62×")


def test_future_record_is_refused_and_the_newer_refuted_run_decides(tree):
    root, recs = tree
    forged = rk.build(root, "softmax-online", created="2099-01-01T00:00:00.000000Z", kernel_us=150, baseline_us=400, seed=40)
    assert forged.verdict == "verified"
    future = rk.write(root, forged)
    refuted = rk.write(root, rk.build(root, "softmax-online", created="2026-11-20T09:00:00.000000Z",
                                      kernel_us=150, baseline_us=160, seed=41))
    p, problems = assert_refused_everywhere(root, future, "created_utc", "cannot come from the future", "2.67×")
    off = [r for r in p.removed if r.claim_id == "softmax-online" and r.hardware == "nvidia-h200"]
    assert off and f"superseded by the newer refuted record results/{rel(root, refuted)}" in off[0].why


@pytest.mark.parametrize("when", ["zzzz", "2026-13-01T00:00:00Z", "2026-11-02 09:00:00"])
def test_unparsable_date_is_refused_and_nothing_crashes(tree, when, capsys):
    root, recs = tree
    path = recs["softmax_h200"]
    edit(path, lambda d: d.update(created_utc=when))
    assert_refused_everywhere(root, path, "record", f"created_utc: {when!r} is not an ISO-8601 UTC time", "1.62×")
    assert main(["--root", str(root), "table"]) == 0
    assert path.name not in capsys.readouterr().out


def _verified_then_refuted(root, verified_at: str, refuted_at: str):
    """A verified and a refuted record of blackwell-time on one B200, made at the two times given."""
    verified = rk.build(root, "blackwell-time", hw="nvidia-b200", created=verified_at, kernel_us=11.0, seed=50)
    refuted = rk.build(root, "blackwell-time", hw="nvidia-b200", created=refuted_at, kernel_us=30.0, seed=51)
    assert (verified.verdict, refuted.verdict) == ("verified", "refuted")
    return verified, refuted


def test_a_slug_of_its_own_does_not_take_a_record_out_of_its_machines_group(tree):
    """The group a number stands in is what a reader tells numbers apart by (claim and machine), not
    the slug a record states: an old verified record edited to say `nvidia-b200-sxm` stood alone, so
    the newer refutation on the same GPU no longer took its number off (an adversarial review)."""
    root, _ = tree
    verified, refuted = _verified_then_refuted(root, "2026-11-09T09:00:00.000000Z", "2026-11-10T09:00:00.000000Z")
    rk.write(root, verified.model_copy(update={"hardware": {**verified.hardware, "slug": "nvidia-b200-sxm"}}))
    rk.write(root, refuted)
    p, problems, listed = run_both(root)
    line = next(ln for ln in listed.splitlines() if ln.startswith("- Blackwell Tuning Guide - Guidance"))
    assert "claimbench" not in line and problems == []
    assert any(r.claim_id == "blackwell-time" and "superseded by the newer refuted" in r.why for r in p.removed)


def test_a_record_whose_sources_lack_a_file_its_claim_names_is_refused_everywhere(tree, tmp_path):
    """With the kernel's file dropped from `source_sha256`, the number never went stale when that file
    changed: it stayed on the list, audit clean (an adversarial review, 2026-12-06). Ingest refuses it too."""
    from claimbench.report.ingest import ingest
    from claimbench.store.record import write_record

    root, recs = tree
    path = recs["transpose_new"]
    kernel_file = next(f for f in load_record(path).source_sha256 if f != "kernels/stubs.py")
    edit(path, lambda d: d["source_sha256"].pop(kernel_file))
    assert_refused_everywhere(root, path, "source_sha256", f"lacks {kernel_file}, which claims/transpose-tiled.yaml names",
                              "1.07×")
    outside = tmp_path / "artifacts"
    write_record(outside, load_record(path))
    report = ingest(root, [outside], root / "results", dry_run=True)
    assert [p.key for p in report.refused] == ["source_sha256"], report


def test_latest_is_by_time_not_by_how_the_time_is_written(tree):
    """0.9 s later, written with a fraction: the old string order put the verified run last."""
    root, _ = tree
    verified, refuted = _verified_then_refuted(root, "2026-11-09T09:00:00Z", "2026-11-09T09:00:00.900000Z")
    rk.write(root, verified)
    rk.write(root, refuted)
    p, problems, listed = run_both(root)
    line = next(ln for ln in listed.splitlines() if ln.startswith("- Blackwell Tuning Guide - Guidance"))
    assert "claimbench" not in line
    assert any(r.claim_id == "blackwell-time" and "superseded by the newer refuted" in r.why for r in p.removed)
    assert problems == []


def test_ties_are_broken_by_file_name(tree):
    root, _ = tree
    a = rk.build(root, "blackwell-time", hw="nvidia-b200", created="2026-11-09T09:00:00.000000Z", kernel_us=11.0, seed=52)
    b = rk.build(root, "blackwell-time", hw="nvidia-b200", created="2026-11-09T09:00:00.000000Z", kernel_us=30.0, seed=53)
    pa, pb = rk.write(root, a), rk.write(root, b)
    winner = max(pa, pb, key=lambda x: x.name)
    for _ in range(2):
        p = plan(root, root / "LIST.md", root / "results", now=NOW)
        shown = [n.record for n in p.numbers if n.claim_id == "blackwell-time"]
        assert shown == ([rel(root, winner)] if winner == pa else [])


FORGERIES = {
    "forged verdict 9.99x": ("transpose_new", "verdict", "9.99×", lambda d: d.update(
        verdict="verified", value=9.99, ci_low=9.9, ci_high=10.1, published_value=9.99)),
    "only published_value 42x": ("softmax_h200", "published_value", "42.00×", lambda d: d.update(published_value=42.0)),
    "rounds shorter than samples": ("softmax_h200", "record", "1.62×", lambda d: d["kernel"].update(
        rounds=d["kernel"]["rounds"][:30])),
    "zero sample": ("softmax_h200", "record", "1.62×", lambda d: d["kernel"]["samples_us"].__setitem__(0, 0.0)),
    "negative sample": ("softmax_h200", "record", "1.62×", lambda d: d["kernel"]["samples_us"].__setitem__(5, -150.0)),
    "unknown metric": ("softmax_h200", "record", "1.62 bogus", lambda d: d["claimed"].update(metric="bogus")),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_publish_never_shows_what_audit_rejects(tree, name):
    root, recs = tree
    key, field, shown, fn = FORGERIES[name]
    edit(recs[key], fn)
    assert_refused_everywhere(root, recs[key], field, "", shown)


def test_record_in_another_claims_folder_is_refused(tree):
    root, recs = tree
    src = recs["gemm_h200"]
    moved = recs["scan_h200"].parent / src.name
    shutil.move(src, moved)
    p, problems = assert_refused_everywhere(root, moved, "claim_id", "does not match its folder", "640 TFLOP/s")
    assert "deepgemm-fp8" not in [n.claim_id for n in p.numbers]


def test_records_of_a_claim_with_no_claim_file_are_refused(tree):
    root, recs = tree
    ghost = rk.build(root, "softmax-online", seed=60, kernel_us=150, baseline_us=240)
    ghost = ghost.model_copy(update={"claim_id": "ghost"})
    path = rk.write(root, ghost)
    p, problems, _ = run_both(root)
    assert [(x.key, x.message.split(";")[0]) for x in problems if x.path == f"results/{rel(root, path)}"] == [
        ("claim_id", "no claim file for 'ghost' under claims/")]
    assert p.failed


@pytest.mark.parametrize("name", ["notes.json", "20261102T090000Z-nvidia-h200-ZZZZ.json", "record.json.bak", "x.md"])
def test_only_runner_names_are_records(tree, name):
    root, recs = tree
    stray = recs["softmax_h200"].parent / name
    shutil.copy(recs["softmax_h200"], stray)
    p, problems, _ = run_both(root)
    want = f"results/records/softmax-online/{name}"
    assert [(x.path, x.key) for x in problems] == [(want, "file")]
    assert "not a record the runner wrote" in problems[0].message
    assert p.failed and any(line.startswith(f"  ! not a record: {want}") for line in p.lines())


def test_record_file_name_must_carry_its_own_time(tree):
    root, recs = tree
    src = recs["softmax_h200"]
    renamed = src.with_name("20991231T000000Z" + src.name[16:])
    src.rename(renamed)
    assert_refused_everywhere(root, renamed, "created_utc", "does not match the time in the file name", "1.62×")


def test_symlinks_are_never_followed_out_of_results(tree, tmp_path):
    root, recs = tree
    outside = tmp_path / "elsewhere.json"
    shutil.copy(recs["softmax_h200"], outside)
    link = recs["softmax_h200"].parent / ("20261130T090000Z-nvidia-h200-" + "b" * 10 + ".json")
    link.symlink_to(outside)
    (root / "results" / "records" / "linked-claim").symlink_to(tmp_path)
    p, problems, _ = run_both(root)
    assert sorted((x.path, x.message.split(";")[0]) for x in problems) == [
        ("results/records/linked-claim", "a symlink"), (f"results/{rel(root, link)}", "a symlink")]
    assert p.failed


def test_dirty_means_a_file_the_number_depends_on(tree):
    root, _ = tree

    def with_changes(files, seed):
        rec = rk.build(root, "blackwell-time", hw="nvidia-b200", created=f"2026-11-1{seed % 10}T09:00:00.000000Z",
                       kernel_us=11.0, seed=seed, dirty=True)
        hw = dict(rec.hardware)
        hw["software"] = {**hw["software"], "git_dirty": True, "git_dirty_files": files}
        return rk.write(root, rec.model_copy(update={"hardware": hw}))

    clean = with_changes(["README.md", "LIST.md", "kernels/other.py"], 71)
    p = plan(root, root / "LIST.md", root / "results", now=NOW)
    assert [n.record for n in p.numbers if n.claim_id == "blackwell-time"] == [rel(root, clean)]
    dirty = with_changes(["README.md", "kernels/stubs.py", "src/claimbench/verdict.py"], 72)
    p = plan(root, root / "LIST.md", root / "results", now=NOW)
    assert p.why_not[rel(root, dirty)] == ("from a dirty tree: kernels/stubs.py, src/claimbench/verdict.py differed "
                                           f"from commit {rk.head(root)[:10]}; commit, rerun, or pass --allow-dirty")
    assert [n.record for n in p.numbers if n.claim_id == "blackwell-time"] == [rel(root, clean)]


def _git(root, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root, check=True,
                   capture_output=True)


@pytest.fixture
def committed(tree):
    root, recs = tree
    (root / ".gitignore").write_text("results/.cache/\nresults/index.jsonl\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-qm", "records")
    return root, recs


def test_a_changed_committed_record_is_refused_and_dirties_the_tree(committed):
    from claimbench.store.provenance import tree_changes

    root, recs = committed
    assert tree_changes(root) == []
    edit(recs["softmax_h200"], lambda d: d.update(reason=d["reason"] + " "))
    assert tree_changes(root) == [f"results/{rel(root, recs['softmax_h200'])}"]
    assert_refused_everywhere(root, recs["softmax_h200"], "record", "modified since commit HEAD", "1.62×")


def test_a_deleted_committed_record_does_not_bring_an_old_number_back(committed):
    root, recs = committed
    recs["transpose_new"].unlink()  # the refuted run that took transpose's verified number off
    p, problems, listed = run_both(root)
    assert "Efficient Matrix Transpose in CUDA C/C++ - Shared-memory tiles so reads and writes both coalesce.\n" in listed
    assert p.failed and p.tampered[0][0] == "transpose-tiled"
    assert [(x.path, x.key) for x in problems] == [(f"results/{rel(root, recs['transpose_new'])}", "record")]
    assert "deleted since commit HEAD" in problems[0].message


def test_audit_holds_committed_records_to_the_base_of_a_pull_request(committed):
    """CI checks a pull request at its own commit: a refutation deleted there (or a record rewritten
    there) is part of HEAD, so audit against HEAD was clean and the old number came back (an
    adversarial review, 2026-12-06). `--base REF` holds the records to the merge base instead."""
    from claimbench.errors import UsageError
    from claimbench.report.audit import audit_report

    root, recs = committed
    main_sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    _git(root, "checkout", "-qb", "pr")
    _git(root, "rm", "-q", str(recs["transpose_new"]))  # the refuted run that took transpose's number off
    edit(recs["softmax_h200"], lambda d: d.update(reason=d["reason"] + " "))
    _git(root, "commit", "-qam", "pr")
    against_head, _ = audit_report(root, root / "LIST.md", root / "results", cache=False, now=NOW)
    assert not [x for x in against_head if x.key == "record"]  # the gap: HEAD holds the pull request's edits
    problems, _ = audit_report(root, root / "LIST.md", root / "results", cache=False, now=NOW, base=main_sha)
    whats = {x.path: x.message for x in problems if x.key == "record"}
    assert whats[f"results/{rel(root, recs['transpose_new'])}"].startswith(f"deleted since {main_sha} (merge base")
    assert whats[f"results/{rel(root, recs['softmax_h200'])}"].startswith(f"modified since {main_sha} (merge base")
    with pytest.raises(UsageError, match="--base no-such-branch: not a commit"):
        audit_report(root, root / "LIST.md", root / "results", cache=False, now=NOW, base="no-such-branch")
    assert main(["--root", str(root), "audit", "--no-cache", "--base", main_sha]) == 1
    assert main(["--root", str(root), "audit", "--no-cache", "--base=--output=x"]) == 2  # never an option for git


def test_new_records_the_list_and_killed_publishes_never_dirty_a_tree(committed):
    from claimbench.store.provenance import tree_changes

    root, _ = committed
    rk.write(root, rk.build(root, "blackwell-time", hw="nvidia-b200", created="2026-11-20T09:00:00.000000Z",
                            kernel_us=11.0, seed=80))
    (root / "LIST.md").write_text((root / "LIST.md").read_text() + "\n")
    (root / ".LIST.md.99999999.abc123.tmp").write_text("half a list")
    (root / "results" / "site").mkdir()
    (root / "results" / "site" / "index.html").write_text("<html>")
    assert tree_changes(root) == []
    (root / "kernels" / "new_task.py").write_text("x = 1\n")
    assert tree_changes(root) == ["kernels/new_task.py"]


def test_refused_records_make_publish_exit_1_with_why(tree, capsys):
    root, recs = tree
    edit(recs["softmax_h200"], lambda d: d.update(published_value=42.0))
    assert main(["--root", str(root), "publish"]) == 1
    captured = capsys.readouterr()
    assert f"  ! refused results/{rel(root, recs['softmax_h200'])}: published_value: says 42.0" in captured.err
    assert "Traceback" not in captured.err
    edit(recs["softmax_h200"], lambda d: d.update(published_value=d["value"]))
    assert main(["--root", str(root), "publish"]) == 0


def test_publish_exits_1_when_it_takes_a_number_off(tree, capsys):
    root, _ = tree
    assert main(["--root", str(root), "publish"]) == 0
    stub = root / "kernels" / "stubs.py"
    stub.write_text(stub.read_text() + "\n# changed\n")
    assert main(["--root", str(root), "publish"]) == 1
    out = capsys.readouterr().out
    assert "taken off, no current verified record backs it" in out
    assert main(["--root", str(root), "publish"]) == 0


def test_publish_rereads_a_record_the_index_still_trusts(tree):
    """Same size, same mtime, other bytes: the index cannot tell, publish still must."""
    root, recs = tree
    path = recs["softmax_h200"]
    st = os.stat(path)
    text = path.read_text()
    at = text.index('"published_value": ') + len('"published_value": ')
    forged = text[:at] + "9" + text[at + 1:]  # 1.62... becomes 9.62...
    assert len(forged) == len(text) and forged != text
    path.write_text(forged)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    p = plan(root, root / "LIST.md", root / "results", now=NOW)
    assert rel(root, path) in {x[0] for x in p.refused}
    assert rel(root, path) not in [n.record for n in p.numbers]


def test_publish_does_not_trust_an_index_line_that_disagrees_with_its_record(tree):
    """The index is a cache: a line edited to say more than the record does is read again."""
    from claimbench.store.index import INDEX_NAME

    root, recs = tree
    plan(root, root / "LIST.md", root / "results", now=NOW)  # the verify cache now knows every decider
    index = root / "results" / INDEX_NAME
    lines = index.read_text().splitlines()
    target = rel(root, recs["softmax_h200"])
    lines = [ln.replace('"published_value":1.6', '"published_value":4.2') if target in ln else ln for ln in lines]
    assert sum('"published_value":4.2' in ln for ln in lines) == 1
    index.write_text("\n".join(lines) + "\n")
    p = plan(root, root / "LIST.md", root / "results", now=NOW)
    shown = next(n for n in p.numbers if n.record == target)
    assert shown.text.startswith("1.62× [1.61, 1.63]")


def test_only_numbers_that_would_be_shown_are_recomputed_and_the_next_one_moves_up(tree):
    """With two numbers per entry, the third (softmax-online-bw) is never shown, so publish need
    not recompute it; once the newest H200 softmax is refused, it moves up, is recomputed, and
    is refused too: the older H200 run and the H100 run are shown, as audit expects."""
    root, recs = tree
    edit(recs["bw_h200"], lambda d: d.update(published_value=9.0))
    p = plan(root, root / "LIST.md", root / "results", now=NOW, max_per_entry=2)
    assert not p.refused and rel(root, recs["bw_h200"]) not in [n.record for n in p.numbers]
    edit(recs["softmax_h200"], lambda d: d.update(published_value=42.0))
    p = publish(root, root / "LIST.md", root / "results", now=NOW, max_per_entry=2)
    assert sorted(x[0] for x in p.refused) == sorted(rel(root, recs[k]) for k in ("bw_h200", "softmax_h200"))
    softmax = [n.record for n in p.numbers if n.entry_key.endswith("Online Normalizer Calculation for Softmax")]
    assert softmax == [rel(root, recs["softmax_h100"]), rel(root, recs["softmax_h200_old"])]
    problems = audit(root, root / "LIST.md", root / "results", cache=False, now=NOW, max_per_entry=2)
    assert not [x for x in problems if x.path == "LIST.md"]
    assert {x.path for x in problems} == {f"results/{rel(root, recs[k])}" for k in ("bw_h200", "softmax_h200")}


def test_a_record_naming_a_commit_the_repository_lacks_is_refused(tree):
    """Issue 25: ingest refused it, publish showed it and audit passed; now all three refuse it."""
    root, recs = tree
    path = recs["transpose_new"]
    edit(path, lambda d: d.update(git_commit="0123456789abcdef0123456789abcdef01234567"))
    assert_refused_everywhere(root, path, "git_commit", "is not in this repository", "0123456789")


def test_a_number_resting_on_a_git_ignored_module_is_refused(tree):
    """The run read kernels/build/fast.py, which no commit holds: the number cannot be checked out."""
    root, recs = tree
    (root / ".gitignore").write_text("kernels/build/\n")
    rk.commit_all(root, "ignore the build folder")
    built = root / "kernels" / "build" / "fast.py"
    built.parent.mkdir()
    built.write_text("SPEED = 'secret'\n")
    rec = rk.build(root, "scan-decoupled", created="2026-11-20T09:00:00.000000Z", kernel_us=117.6, floor_us=100.0, seed=31)
    rec = rec.model_copy(update={"source_sha256": {**rec.source_sha256, "kernels/build/fast.py": rk.sha256_file(built)}})
    path = rk.write(root, rec)
    assert rec.verdict == "verified" and rec.git_dirty is False
    assert_refused_everywhere(root, path, "source_sha256", "kernels/build/fast.py does not exist at commit",
                              path.name)


def test_a_record_whose_claim_changed_at_a_later_commit_is_stale_not_refused(tree):
    """Made at its own commit, whose files match: the claim changed since, so it backs no number."""
    root, recs = tree
    p, problems, _ = run_both(root)
    r = rel(root, recs["softmax_gh200_stale"])
    assert r not in dict((x[0], x) for x in p.refused)
    assert p.why_not[r].startswith("stale hash: claims/softmax-online.yaml changed"), p.why_not
    assert not [x for x in problems if x.path == f"results/{r}"]


def test_publish_outside_a_git_repository_refuses_records_that_claim_a_clean_commit(tree):
    root, recs = tree
    shutil.rmtree(root / ".git")
    p = publish(root, root / "LIST.md", root / "results", now=NOW)
    assert p.failed and not p.numbers
    assert all(key == "git_commit" and "not inside a git repository" in msg for _, key, msg in p.refused
               if key == "git_commit") and any(key == "git_commit" for _, key, _ in p.refused)


@pytest.mark.parametrize("rel", ["claims/a\x00b.yaml", "claims/" + "x" * 5000 + ".yaml", "../outside.yaml"])
def test_a_path_from_a_record_that_names_no_file_here_hashes_as_missing(tmp_path, rel):
    """A NUL byte in a record's claim_path stopped audit and publish with `ValueError: embedded null byte`."""
    from claimbench.report.standing import Hashes

    (tmp_path / "outside.yaml").write_text("x")
    (tmp_path / "proj").mkdir()
    assert Hashes(tmp_path / "proj").get(rel) is None
