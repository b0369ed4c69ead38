"""ingest: records from two machines round-trip into one list entry; records that do not match
their commit, or that audit would fail, are refused one line each."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import recordkit as rk

from claimbench.cli import main
from claimbench.report.ingest import find_records, ingest
from claimbench.report.publish import publish
from claimbench.store.record import MIN_PROTOCOL_VERSION, write_record


@pytest.fixture
def project(tmp_path):
    """The publish fixture as a git repository with one commit; results/ empty and ignored."""
    root = rk.copy_tree(tmp_path / "proj")
    (root / ".gitignore").write_text("results/\n")
    rk.git(root, "add", "-A")  # results/ is ignored here, so commit_all's pathspec for it would be refused
    rk.git(root, "commit", "-qm", "fixture")
    return root, rk.head(root)


def _fleet(tmp_path: Path, root: Path, commit: str, **over) -> dict[str, Path]:
    """What two fleet runners upload: one softmax record each, on an H200 and on an H100."""
    runs = tmp_path / "artifacts"
    h200 = rk.build(root, "softmax-online", hw="nvidia-h200", created="2026-11-02T09:00:00.000000Z",
                    kernel_us=150, baseline_us=243, seed=2, git_commit=commit, **over)
    h100 = rk.build(root, "softmax-online", hw="nvidia-h100", created="2026-11-02T10:00:00.000000Z",
                    kernel_us=200, baseline_us=304, seed=3, git_commit=commit, **over)
    return {"h200": write_record(runs / "h200", h200), "h100": write_record(runs / "h100", h100)}


def test_two_machines_round_trip_into_one_entry(project, tmp_path):
    root, commit = project
    made = _fleet(tmp_path, root, commit)
    report = ingest(root, [tmp_path / "artifacts"], root / "results")
    assert report.refused == [] and report.present == []
    dests = sorted(Path(d) for _, d in report.ingested)
    assert dests == sorted(root / "results" / "records" / "softmax-online" / p.name for p in made.values())
    for p in made.values():  # byte for byte, under their own names
        assert (root / "results" / "records" / "softmax-online" / p.name).read_bytes() == p.read_bytes()
    plan = publish(root, root / "LIST.md", root / "results")
    assert plan.changed
    line = next(x for x in (root / "LIST.md").read_text().splitlines() if x.startswith("- Online Normalizer"))
    for p in made.values():
        assert f"results/records/softmax-online/{p.name}" in line
    assert "H200" in line and "H100" in line
    again = ingest(root, [tmp_path / "artifacts"], root / "results")  # idempotent
    assert again.ingested == [] and len(again.present) == 2 and again.refused == []
    assert main(["--root", str(root), "audit", "--no-cache"]) == 0


def test_a_record_whose_hashes_do_not_match_its_commit_is_refused(project, tmp_path):
    root, commit = project
    stubs = root / "kernels" / "stubs.py"
    stubs.write_text(stubs.read_text() + "\n# edited after the commit\n")  # the run saw uncommitted code
    made = _fleet(tmp_path, root, commit)
    report = ingest(root, [made["h200"]], root / "results")
    assert report.ingested == []
    (p,) = report.refused
    assert (p.path, p.line, p.key) == (str(made["h200"]), 1, "source_sha256")
    assert p.message == (f"kernels/stubs.py at commit {commit[:12]} does not have the sha256 the record names: "
                         "the record was not made from that commit's files")
    assert not (root / "results" / "records").exists()


def test_every_refusal_is_one_located_line(project, tmp_path, capsys):
    root, commit = project
    good = _fleet(tmp_path, root, commit)["h200"]
    bad = tmp_path / "bad"
    bad.mkdir()

    def variant(name: str, file: str = "", **changes) -> Path:
        """The good record changed, under the good record's name (or ``file``) in a folder of its own."""
        d = json.loads(good.read_text())
        d.update(changes)
        out = bad / name / (file or good.name)
        out.parent.mkdir()
        out.write_text(json.dumps(d))
        return out

    cases = {
        variant("unknown-commit", git_commit="0123456789abcdef0123456789abcdef01234567"): ("git_commit", "is not in this repository"),
        variant("dirty", git_dirty=True): ("git_dirty", "dirty or unknown tree"),
        variant("no-commit", git_commit="HEAD~1"): ("git_commit", "is not a commit hash"),
        variant("claim-hash", claim_sha256="0" * 64): ("claim_sha256", "claims/softmax-online.yaml at commit"),
        variant("old-protocol", protocol_version=MIN_PROTOCOL_VERSION - 1): ("protocol_version", "rerun the claim"),
        variant("edited-value", value=9.99): ("value", "edited by hand?"),
        variant("edited-verdict", verdict="refuted", published_value=None): ("verdict", "says refuted"),
        variant("escape", source_sha256={"../outside.py": "0" * 64}): ("source_sha256", "not a path inside the project"),
        variant("missing-file", source_sha256={"kernels/nope.py": "0" * 64}): ("source_sha256", "does not exist at commit"),
        # names audit would call strays, or whose time is not the record's: ingest refuses them alike
        variant("evil", file="evil.json"): ("file", "not a record the runner wrote"),
        variant("renamed", file="20991231T235959Z" + good.name[16:]): ("created_utc", "does not match the time in the file name"),
        variant("redated", created_utc="2026-11-01T09:00:00.000000Z"): ("created_utc", "does not match the time in the file name"),
    }
    (bad / "not-json.json").write_text("{")
    cases[bad / "not-json.json"] = ("record", "corrupt or truncated JSON")
    (bad / "newer.json").write_text(json.dumps({**json.loads(good.read_text()), "schema_version": 99}))
    cases[bad / "newer.json"] = ("record", "newer than this claimbench reads")
    report = ingest(root, [bad], root / "results")
    assert report.ingested == [] and len(report.refused) == len(cases)
    for p in report.refused:
        key, phrase = cases[Path(p.path)]
        assert (p.key, p.line) == (key, 1) and phrase in p.message and "\n" not in p.message, p
    # the command: the good one copied, the rest on stderr one line each, exit 1
    rc = main(["--root", str(root), "ingest", str(bad), str(good)])
    out = capsys.readouterr()
    assert rc == 1
    assert out.out.splitlines() == [f"ingested {root / 'results' / 'records' / 'softmax-online' / good.name}",
                                    f"ingest: 1 ingested, 0 already present, {len(cases)} refused"]
    assert len(out.err.splitlines()) == len(cases) and "Traceback" not in out.err


def test_a_name_clash_with_a_different_record_is_refused(project, tmp_path):
    root, commit = project
    good = _fleet(tmp_path, root, commit)["h200"]
    dest = root / "results" / "records" / "softmax-online" / good.name
    dest.parent.mkdir(parents=True)
    dest.write_text(good.read_text() + "\n")
    (p,) = ingest(root, [good], root / "results").refused
    assert p.key == "file" and "already holds a different record" in p.message


def test_sources_and_defaults(project, tmp_path, capsys):
    root, commit = project
    made = _fleet(tmp_path, root, commit)
    hidden = tmp_path / "artifacts" / "h200" / ".cache"
    hidden.mkdir()
    (hidden / "x.json").write_text("{}")
    assert sorted(find_records([tmp_path / "artifacts"])) == sorted(made.values())
    # default source: results/runs; a missing one is a usage error
    assert main(["--root", str(root), "ingest"]) == 2
    assert "results/runs: no such file or folder" in capsys.readouterr().err
    runs = root / "results" / "runs"
    write_record(runs, rk.build(root, "softmax-online", created="2026-11-03T09:00:00.000000Z", kernel_us=150,
                                baseline_us=243, seed=4, git_commit=commit))
    assert main(["--root", str(root), "ingest", "--dry-run"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "ingest: 1 to ingest (dry run), 0 already present, 0 refused"
    assert not (root / "results" / "records").exists()
    assert main(["--root", str(root), "ingest"]) == 0
    assert len(list((root / "results" / "records" / "softmax-online").glob("*.json"))) == 1


def test_outside_a_git_repository_is_a_usage_error(tmp_path, capsys):
    root = rk.copy_tree(tmp_path / "plain", committed=False)
    assert main(["--root", str(root), "ingest", str(root)]) == 2
    assert "not a git repository" in capsys.readouterr().err


def test_links_fifos_and_huge_files_are_refused_without_hanging(project, tmp_path):
    """Issue 25: a symlink to /dev/zero (MemoryError), a FIFO (a hang), a 2 GiB sparse file
    (SIGSEGV) and a link to a record outside the folder (followed): each one refused line now."""
    import os

    root, commit = project
    made = _fleet(tmp_path, root, commit)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "zero.json").symlink_to("/dev/zero")
    os.mkfifo(bad / "fifo.json")
    with open(bad / "sparse.json", "wb") as f:
        f.truncate(2 << 30)
    (bad / "outside.json").symlink_to(made["h200"])
    report = ingest(root, [bad], root / "results")
    assert report.ingested == []
    why = {Path(p.path).name: p.message for p in report.refused}
    assert set(why) == {"zero.json", "fifo.json", "sparse.json", "outside.json"}, why
    assert "symlink" in why["zero.json"] and "symlink" in why["outside.json"]
    assert "not a regular file" in why["fifo.json"] and "limit" in why["sparse.json"]


def test_skipped_records_are_checked_and_left_unless_asked(project, tmp_path, capsys):
    """Issue 26: the main job's 32 `skipped` records buried the few with a number."""
    root, commit = project
    runs = tmp_path / "runs"
    num = rk.build(root, "softmax-online", hw="nvidia-h200", created="2026-11-02T09:00:00.000000Z",
                   kernel_us=150, baseline_us=243, seed=2, git_commit=commit)
    skip = rk.build(root, "softmax-online", hw="nvidia-gh200", created="2026-11-02T10:00:00.000000Z",
                    mode="correctness-only", seed=3, git_commit=commit)
    assert skip.verdict == "skipped"
    write_record(runs, num)
    skipped_path = write_record(runs, skip)
    assert main(["--root", str(root), "ingest", str(runs)]) == 0
    out = capsys.readouterr().out
    assert "1 ingested" in out and "1 skipped left where they are" in out, out
    assert skipped_path.exists() and not list((root / "results" / "records").rglob(skipped_path.name))
    assert main(["--root", str(root), "ingest", "--skipped", str(runs)]) == 0
    assert list((root / "results" / "records").rglob(skipped_path.name))


def test_a_tree_dirty_only_in_files_the_claim_does_not_read_is_ingested_and_a_relevant_one_is_named(project, tmp_path):
    """ingest judges a dirty tree as publish and audit do (`summary.judged_dirty`): an untracked
    `.venv` link or an edited README does not touch the number, so the record is taken (before,
    ingest refused what publish showed, without saying which file); a changed source the claim
    read is refused, and named."""
    root, commit = project

    def dirty(files: list[str]) -> dict:
        hw = rk.hardware("nvidia-h200")
        return {"dirty": True, "hardware": {**hw, "software": {**hw["software"], "git_dirty": True, "git_dirty_files": files}}}

    aside = _fleet(tmp_path / "aside", root, commit, **dirty([".venv", "README.md"]))["h200"]
    relevant = _fleet(tmp_path / "relevant", root, commit, **dirty(["kernels/stubs.py", ".venv"]))["h100"]
    report = ingest(root, [aside, relevant], root / "results")
    assert [Path(src).name for src, _ in report.ingested] == [aside.name]
    (p,) = report.refused
    assert (p.path, p.key) == (str(relevant), "git_dirty")
    assert f"kernels/stubs.py differed from commit {commit[:10]}" in p.message and ".venv" not in p.message, p.message
    plan = publish(root, root / "LIST.md", root / "results")
    assert [Path(n.record).name for n in plan.numbers] == [aside.name]
    assert main(["--root", str(root), "audit", "--no-cache"]) == 0


def _store_link(root: Path, good: Path, target: Path) -> Path:
    """The record's destination in the store, made a symlink to ``target``, as a commit can carry it."""
    dest = root / "results" / "records" / "softmax-online" / good.name
    dest.parent.mkdir(parents=True)
    dest.symlink_to(target)
    return dest


@pytest.mark.parametrize("target", ["/dev/null", "copy"])
def test_a_symlink_where_the_record_belongs_is_refused_not_read(project, tmp_path, capsys, target):
    """A committed `results/records/<claim>/<name>.json -> /dev/zero` was read for ever (MemoryError);
    a link to the same bytes elsewhere counted as "already present". /dev/null and such a copy stand
    for it here: reading /dev/zero in a test of the old code would take all memory."""
    root, commit = project
    good = _fleet(tmp_path, root, commit)["h200"]
    copy = tmp_path / "elsewhere.json"
    copy.write_bytes(good.read_bytes())
    dest = _store_link(root, good, Path("/dev/null") if target == "/dev/null" else copy)
    for dry_run in (True, False):
        report = ingest(root, [good], root / "results", dry_run=dry_run)
        assert report.ingested == [] and report.present == []
        (p,) = report.refused
        assert (p.path, p.key) == (str(good), "file") and str(dest) in p.message and "symbolic link" in p.message, p
    assert main(["--root", str(root), "ingest", str(good)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "symbolic link" in err and "Traceback" not in err
    assert dest.is_symlink() and copy.read_bytes() == good.read_bytes()


@pytest.mark.parametrize("linked", ["records", "records/softmax-online"])
def test_a_symlinked_store_folder_is_refused_and_nothing_lands_outside_results(project, tmp_path, capsys, linked):
    """A claim folder (or records/) that is a symlink carried the record out of results/ (mode
    0600) and then raised ValueError in `append_index`: now one refused line, and nothing written."""
    root, commit = project
    good = _fleet(tmp_path, root, commit)["h200"]
    outside = tmp_path / "outside"
    (outside / "softmax-online").mkdir(parents=True)
    link = root / "results" / linked
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside if linked == "records" else outside / "softmax-online")
    for dry_run in (True, False):
        report = ingest(root, [good], root / "results", dry_run=dry_run)
        assert report.ingested == [] and report.present == []
        (p,) = report.refused
        assert p.key == "file" and f"{link}: a symbolic link" in p.message and "\n" not in p.message, p
    assert main(["--root", str(root), "ingest", str(good)]) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert [p for p in outside.rglob("*") if p.is_file()] == []
    assert not (root / "results" / "index.jsonl").exists()


def test_a_file_where_the_claim_folder_belongs_is_refused(project, tmp_path):
    root, commit = project
    good = _fleet(tmp_path, root, commit)["h200"]
    (root / "results" / "records").mkdir(parents=True)
    (root / "results" / "records" / "softmax-online").write_text("not a folder\n")
    (p,) = ingest(root, [good], root / "results").refused
    assert p.key == "file" and "not a folder" in p.message


def test_ingested_records_are_world_readable_whatever_the_umask(project, tmp_path):
    """As the runner writes them (0644): a record is committed and read by everyone."""
    import os

    root, commit = project
    made = _fleet(tmp_path, root, commit)
    old = os.umask(0o077)
    try:
        report = ingest(root, [tmp_path / "artifacts"], root / "results")
    finally:
        os.umask(old)
    assert report.refused == [] and len(report.ingested) == 2
    for _, dest in report.ingested:
        assert os.stat(dest).st_mode & 0o777 == 0o644, dest
    folder = root / "results" / "records" / "softmax-online"
    assert sorted(p.name for p in folder.iterdir()) == sorted(p.name for p in made.values())  # no temp left


@pytest.mark.parametrize("ahead,taken", [(timedelta(hours=2), False), (timedelta(minutes=1), True)])
def test_ingest_and_audit_agree_on_a_record_dated_ahead(project, tmp_path, ahead, taken):
    """One judgement for time: ingest allowed a day ahead (recordcheck's cached bound) while audit
    allows five minutes of clock skew (`standing.utc_bound`); ingest now holds records to audit's bound."""
    from claimbench.report.audit import audit

    root, commit = project
    when = (datetime.now(timezone.utc) + ahead).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    rec = rk.build(root, "softmax-online", created=when, kernel_us=150, baseline_us=243, seed=5, git_commit=commit)
    art = write_record(tmp_path / "artifacts", rec)
    report = ingest(root, [art], root / "results", dry_run=True)
    assert (len(report.ingested), len(report.refused)) == ((1, 0) if taken else (0, 1)), report
    if not taken:
        (p,) = report.refused
        assert p.key == "created_utc" and "cannot come from the future" in p.message
    path = rk.write(root, rec)  # placed by hand: audit judges the same bytes
    refused = [p for p in audit(root, root / "LIST.md", root / "results", cache=False)
               if path.name in str(p) and p.key == "created_utc"]
    assert bool(refused) is not taken, refused


@pytest.mark.parametrize("what", ["link", "foreign"])
def test_ingest_never_writes_through_or_over_an_index_that_is_not_its_own(project, tmp_path, what):
    """`results/index.jsonl` committed as a symlink to a shell's rc file got a line of record text
    appended by `ingest` (an adversarial review: a `$(...)` in the record's reason ran when the file
    was sourced); a file of someone else's at that name was replaced by `table --results`. Neither
    is written now, and the index is read again from the records instead."""
    root, commit = project
    good = _fleet(tmp_path, root, commit)["h200"]
    target = tmp_path / "bashrc"
    target.write_text("export PS1='$ '\n")
    index = root / "results" / "index.jsonl"
    index.parent.mkdir(parents=True, exist_ok=True)
    if what == "link":
        index.symlink_to(target)
    else:
        index.write_text("my own notes, not an index\n")
    assert main(["--root", str(root), "ingest", str(good)]) == 0
    assert main(["--root", str(root), "table", "--format", "csv"]) == 0
    assert target.read_text() == "export PS1='$ '\n"
    if what == "link":
        assert index.is_symlink() and index.resolve() == target.resolve()
    else:
        assert index.read_text() == "my own notes, not an index\n"
    assert (root / "results" / "records" / "softmax-online" / good.name).is_file()
