"""publish: golden output, idempotence, what comes off and why, and the list left untouched on bad input."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import recordkit as rk

from claimbench.report import publish as pub
from claimbench.spec.listing import ListError
from claimbench.store.record import MIN_PROTOCOL_VERSION, SCHEMA_VERSION, load_record

GOLDEN = rk.FIXTURE / "LIST.published.md"


def normalize(text: str) -> str:
    """Record file names end in a content hash; the golden file does not pin it.

    The golden numbers come from decide() on recordkit's samples: after a deliberate change to
    verdict.py, regenerate with CLAIMBENCH_UPDATE_GOLDEN=1 and `recordkit.make_v1_fixture()`."""
    return re.sub(r"-[0-9a-f]{10}\.json", "-HASH.json", text)


@pytest.fixture
def tree(tmp_path):
    return rk.standard_tree(tmp_path / "proj")


def run(root, **kw):
    return pub.publish(root, root / "LIST.md", root / "results", **kw)


def test_golden_output(tree):
    root, _ = tree
    plan = run(root)
    got = normalize((root / "LIST.md").read_text(encoding="utf-8"))
    if os.environ.get("CLAIMBENCH_UPDATE_GOLDEN"):
        GOLDEN.write_text(got, encoding="utf-8")
    assert got == GOLDEN.read_text(encoding="utf-8")
    assert plan.changed and not plan.corrupt and not plan.problems
    off = {(r.claim_id, r.hardware): r.why for r in plan.removed}
    assert off[("transpose-tiled", "nvidia-h200")].startswith("superseded by the newer refuted record")
    assert off[("softmax-online", "nvidia-gh200")].startswith("stale hash: claims/softmax-online.yaml")
    assert off[("scan-decoupled", "nvidia-h100")].startswith(f"protocol {MIN_PROTOCOL_VERSION - 1} is older than the minimum")
    assert [k for k, _ in plan.cleared] == ["Foundational kernel exercises > Efficient Matrix Transpose in CUDA C/C++"]


def test_second_run_changes_nothing(tree):
    root, _ = tree
    run(root)
    first = (root / "LIST.md").read_bytes()
    mtime = (root / "LIST.md").stat().st_mtime_ns
    plan = run(root)
    assert not plan.changed
    assert (root / "LIST.md").read_bytes() == first
    assert (root / "LIST.md").stat().st_mtime_ns == mtime


def test_text_outside_markers_is_kept(tree):
    root, _ = tree
    before = (root / "LIST.md").read_text(encoding="utf-8")
    run(root)
    after = (root / "LIST.md").read_text(encoding="utf-8")
    def strip(t):
        return re.sub(r" ?<!-- claimbench:.*?<!-- /claimbench -->", "", t)
    assert strip(after) == strip(before)
    assert len(after.splitlines()) == len(before.splitlines())


def test_latest_current_record_decides_and_most_recent_first(tree):
    root, recs = tree
    plan = run(root)
    softmax = [n for n in plan.numbers if n.entry_key.endswith("Online Normalizer Calculation for Softmax")]
    assert [n.record for n in softmax] == [
        recs[k].relative_to(root / "results").as_posix() for k in ("softmax_h200", "softmax_h100", "bw_h200")]
    assert softmax[0].text.startswith("1.62× [1.61, 1.63] vs torch.softmax, eager · fixture kernel softmax-online · H200 · "
                                      "bf16 · [record](results/records/")


def test_per_entry_limit_hides_the_oldest(tree):
    root, recs = tree
    plan = run(root, max_per_entry=2)
    assert [n.record for n in plan.hidden] == [recs["bw_h200"].relative_to(root / "results").as_posix()]
    assert "3.91 TB/s" not in (root / "LIST.md").read_text(encoding="utf-8")


def test_same_name_in_two_sections_is_two_entries(tree):
    root, _ = tree
    run(root)
    lines = (root / "LIST.md").read_text(encoding="utf-8").splitlines()
    blackwell = [ln for ln in lines if ln.startswith("- Blackwell Tuning Guide")]
    assert "claimbench" not in blackwell[0]
    assert "<!-- claimbench:NVIDIA > Blackwell Tuning Guide -->12.3 µs [12.2, 12.3] · fixture kernel blackwell-time · B200 · bf16" in blackwell[1]


def test_dirty_records_count_only_with_allow_dirty(tree):
    root, _ = tree
    newer = rk.build(root, "blackwell-time", hw="nvidia-b200", created="2026-11-09T09:00:00.000000Z",
                     kernel_us=11.0, seed=30, dirty=True)
    rk.write(root, newer)
    plan = run(root)
    assert any("12.3 µs" in n.text and not n.dirty for n in plan.numbers)
    plan = run(root, allow_dirty=True)
    shown = [n for n in plan.numbers if n.claim_id == "blackwell-time"]
    assert shown[0].dirty and shown[0].text.startswith("11.0 µs") and shown[0].text.endswith(" · dirty")
    gemm = {(r.claim_id, r.why.split(" record")[0]) for r in plan.removed}
    assert ("deepgemm-fp8", "superseded by the newer refuted") in gemm  # the dirty refuted run now counts


def test_stale_source_hash_takes_numbers_off(tree):
    root, _ = tree
    run(root)
    stub = root / "kernels" / "stubs.py"
    stub.write_text(stub.read_text() + "\n# changed\n")
    plan = run(root)
    assert not plan.numbers
    assert len(plan.removed) == 9  # every (claim, hardware) that has a verified record
    assert all("stale hash:" in r.why and "kernels/stubs.py" in r.why for r in plan.removed)
    assert "claimbench:" not in (root / "LIST.md").read_text(encoding="utf-8")


def test_claim_failing_check_takes_its_number_off(tree):
    root, _ = tree
    lst = root / "LIST.md"
    lst.write_text(lst.read_text().replace("- DeepGEMM -", "- DeepGEMM library -"))
    plan = run(root)
    assert not any(n.claim_id == "deepgemm-fp8" for n in plan.numbers)
    why = next(r.why for r in plan.removed if r.claim_id == "deepgemm-fp8")
    assert "no longer passes check" in why and "DeepGEMM" in why
    assert any(p.key == "entry" for p in plan.problems)


def test_corrupt_and_too_new_records_are_named_and_skipped(tree):
    root, recs = tree
    bad = recs["softmax_h200"]
    bad.write_text(bad.read_text()[:200])  # truncated
    future = json.loads(recs["gemm_h200"].read_text())
    future["schema_version"] = 99
    recs["gemm_h200"].write_text(json.dumps(future))
    plan = run(root)
    errors = {s.path: s.error for s in plan.corrupt}
    assert "corrupt or truncated JSON" in errors[bad.relative_to(root / "results").as_posix()]
    assert "newer than this claimbench reads" in errors[recs["gemm_h200"].relative_to(root / "results").as_posix()]
    assert any(line.startswith("  ! refused results/records/softmax-online/") and "record: " in line for line in plan.lines())
    assert plan.failed
    text = (root / "LIST.md").read_text(encoding="utf-8")
    assert "1.55× [" in text  # the older verified H200 run decides now
    assert "TFLOP/s" not in text


def test_older_record_version_is_migrated_and_not_published_under_an_older_protocol(tree):
    root, _ = tree
    src = rk.FIXTURE / "records_v1" / "softmax-online"
    dst = root / "results" / "records" / "softmax-online"
    for f in src.iterdir():
        shutil.copy(f, dst / f.name)
    rec = load_record(dst / "20261105T090000Z-nvidia-h200-00000000a1.json")
    assert rec.schema_version == SCHEMA_VERSION and rec.verdict == "verified" and rec.kernel.processes == [0] * 60
    assert rec.hardware_spec is None and rec.workload is None
    assert rec.protocol_version == 3
    plan = run(root)
    assert not any(n.record.endswith("00000000a1.json") for n in plan.numbers)  # protocol 3 < the minimum 4
    assert "1.67×" not in (root / "LIST.md").read_text(encoding="utf-8")


def test_list_changed_while_publishing_is_left_untouched(tree, monkeypatch):
    root, _ = tree
    lst = root / "LIST.md"
    real = pub.plan

    def racing(*a, **kw):
        p = real(*a, **kw)
        lst.write_text(lst.read_text() + "\n- Late entry - written by someone else.\n")
        return p

    monkeypatch.setattr(pub, "plan", racing)
    with pytest.raises(pub.ListChanged, match="changed on disk while publish ran"):
        run(root)
    assert lst.read_text().endswith("- Late entry - written by someone else.\n")
    assert "claimbench:Matrix" not in lst.read_text()
    assert not [p for p in root.iterdir() if p.name.startswith(".LIST.md.")]


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("- DeepGEMM - A small", "- DeepGEMM - A small\n- DeepGEMM - again."), "appears twice in section"),
    (lambda t: t.replace("hand-written text stays.", "hand-written text stays. <!-- claimbench:x -->1.2×"), "unclosed"),
])
def test_bad_list_raises_and_is_left_untouched(tree, edit, message):
    root, _ = tree
    lst = root / "LIST.md"
    lst.write_text(edit(lst.read_text()))
    before = lst.read_bytes()
    with pytest.raises(ListError, match=message):
        run(root)
    assert lst.read_bytes() == before


def test_dry_run_writes_nothing(tree):
    root, _ = tree
    before = (root / "LIST.md").read_bytes()
    plan = run(root, dry_run=True)
    assert plan.changed and (root / "LIST.md").read_bytes() == before


@pytest.mark.parametrize("source, shown", [
    (Path(__file__).resolve().parents[2] / "LIST.md", 6),  # the project's own list
    (Path(__file__).resolve().parents[1] / "fixtures" / "lists" / "upstream_shape.md", 2),  # plain text, • bullets
])
def test_other_list_shapes(tree, source, shown):
    root, _ = tree
    shutil.copy(source, root / "LIST.md")
    before = (root / "LIST.md").read_text(encoding="utf-8")
    plan = run(root)
    assert len(plan.numbers) == shown
    after = (root / "LIST.md").read_text(encoding="utf-8")
    def strip(t):
        return re.sub(r" ?<!-- claimbench:.*?<!-- /claimbench -->", "", t)
    assert strip(after) == strip(before)
    assert re.search(r"-->6\d\d TFLOP/s \[6\d\d, 6\d\d\] · fixture kernel deepgemm-fp8 · H200 · fp8 e4m3 · \[record\]",
                     next(ln for ln in after.splitlines() if "DeepGEMM -" in ln))
    assert not run(root).changed


def test_a_number_from_an_unsandboxed_run_says_so(tree):
    root, _ = tree
    newer = rk.build(root, "blackwell-time", hw="nvidia-b200", created="2026-11-09T09:00:00.000000Z",
                     kernel_us=11.0, seed=30,
                     protocol={"warmup_s": 1.0, "rounds": 12, "sandbox": "none: bubblewrap is not installed"})
    rk.write(root, newer)
    plan = run(root)
    shown = [n for n in plan.numbers if n.claim_id == "blackwell-time"]
    assert shown[0].text.startswith("11.0 µs") and shown[0].text.endswith(" · no sandbox"), shown[0].text
    assert all(not n.text.endswith("no sandbox") for n in plan.numbers if n.claim_id != "blackwell-time")


def test_a_number_no_physics_floor_stood_behind_says_so(tree):
    """Issue 22: a claim without flops or bytes (or a run without ceilings) gets no floor; `show`
    said so, the list did not. Its number now carries `no floor`; one held to a floor does not."""
    root, recs = tree
    rec = rk.build(root, "blackwell-time", hw="nvidia-b200", created="2026-11-20T09:00:00.000000Z", kernel_us=12.3,
                   seed=50, floor_us=0.0, floor_term="no flops declared: compute floor 0")
    assert rec.verdict == "verified"
    path = rk.write(root, rec)
    plan = run(root)
    (unfloored,) = [n for n in plan.numbers if n.record.endswith(path.name)]
    assert unfloored.parts[-1] == "no floor" and unfloored.text.endswith(" · no floor")
    floored = [n for n in plan.numbers if n.record.endswith(recs["softmax_h200"].name)]
    assert floored and "no floor" not in floored[0].text
    assert "· no floor" in (root / "LIST.md").read_text(encoding="utf-8")


def _dead_pid() -> int:
    """The pid of a process that has ended (reaped: not running)."""
    import subprocess
    import sys

    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_publish_leaves_files_it_did_not_write_beside_the_list(tree):
    """`.LIST.md.backup.tmp` an hour old and `.LIST.md.2024.draft.tmp` (pid 2024 not running) were
    deleted as publish's temps before; nothing but the exact name publish's mkstemp makes is its own."""
    root, _ = tree
    dead = _dead_pid()
    users = [root / ".LIST.md.backup.tmp", root / ".LIST.md.2024.draft.tmp", root / f".LIST.md.{dead}.abc.tmp",
             root / f".LIST.md.{dead}.ABCDEFGH.tmp", root / f".OTHER.md.{dead}.abcdefgh.tmp",
             root / f".LIST.md.{dead}.abcdefgh.tmp.keep", root / f".LIST.md.x{dead}.abcdefgh.tmp"]
    for p in users:
        p.write_text("my notes\n")
        os.utime(p, (p.stat().st_mtime - 3600,) * 2)
    link = root / f".LIST.md.{dead}.zzzzzzzz.tmp"  # its name, but a link: not a file publish wrote
    link.symlink_to(root / "README.md")
    plan = run(root)
    assert all(p.read_text() == "my notes\n" for p in users) and link.is_symlink()
    assert not [line for line in plan.lines() if "removed" in line]


def test_publish_removes_its_own_temp_once_its_process_is_gone_and_says_so(tree, monkeypatch):
    """A killed publish leaves `.LIST.md.<pid>.<8 random>.tmp`: removed once that pid is not
    running (not by a dry run), and named in the report; a running publish's temp stays."""
    root, _ = tree
    stale = root / f".LIST.md.{_dead_pid()}.k3_9zq0a.tmp"
    stale.write_text("half a list\n")
    live = root / f".LIST.md.{os.getpid()}.abcdefgh.tmp"
    live.write_text("being written\n")
    plan = run(root, dry_run=True)
    assert stale.exists() and plan.swept == ()
    plan = run(root)
    assert not stale.exists() and live.exists()
    assert plan.swept == (str(stale),)
    assert f"  . removed {stale}: a temp file of a publish that is no longer running" in plan.lines()
    # the pattern is the very name publish's mkstemp makes, checked against one it made
    assert pub._own_temp(root / "LIST.md").fullmatch(Path(_written_temp_name(root, monkeypatch)).name)


def _written_temp_name(root: Path, monkeypatch) -> str:
    """The name `_replace_if_unchanged` gives its temp file, caught as it is made."""
    import tempfile

    seen: list[str] = []
    real = tempfile.mkstemp

    def spy(*a, **kw):
        fd, name = real(*a, **kw)
        seen.append(name)
        return fd, name

    monkeypatch.setattr(tempfile, "mkstemp", spy)
    before = (root / "LIST.md").read_bytes()
    pub._replace_if_unchanged(root / "LIST.md", before + b"\n", before, st=os.stat(root / "LIST.md"))
    (name,) = seen
    return name
