"""record: atomic writes that never clobber, versions (migrate older, refuse newer), located errors."""

import json
import re

import pytest

from claimbench.store.record import SCHEMA_VERSION, RecordError, load_record, parse_record, write_record


def _minimal(**kw):
    d = {"schema_version": SCHEMA_VERSION, "claim_id": "c", "created_utc": "2026-01-01T00:00:00.000000Z",
         "harness_version": "0", "claim_sha256": "0" * 64, "claim_path": "claims/c.yaml",
         "claimed": {"metric": "speedup", "value": 1.0, "tolerance": 0.1}, "verdict": "error", "reason": "r"}
    d.update(kw)
    return d


def test_roundtrip_and_no_clobber(tmp_path):
    r = parse_record(_minimal(), "x")
    p1 = write_record(tmp_path, r)
    p2 = write_record(tmp_path, r)
    assert p1 != p2 and p1.is_file() and p2.is_file()
    assert load_record(p1) == r
    assert not list(tmp_path.rglob(".tmp-*"))


def test_newer_schema_is_refused_and_older_is_migrated(tmp_path):
    with pytest.raises(RecordError, match="newer than this claimbench"):
        parse_record(_minimal(schema_version=SCHEMA_VERSION + 1), "x")
    old = _minimal(schema_version=1, kernel={"samples_us": [1.0, 2.0], "rounds": [0, 1]})
    old["status"] = old.pop("verdict")
    r = parse_record(old, "x")
    assert r.verdict == "error" and r.kernel.processes == [0, 0]


def test_corrupt_and_invalid_records_name_the_file(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 2, "claim_id": ')
    with pytest.raises(RecordError, match="bad.json"):
        load_record(bad)
    bad.write_text(json.dumps(_minimal(verdict=None)))
    with pytest.raises(RecordError, match="verdict"):
        load_record(bad)


# --- what a record copies, how it reads, how it is written and read under faults -------------------

import errno  # noqa: E402
import multiprocessing as mp  # noqa: E402
import os  # noqa: E402

import recordkit as rk  # noqa: E402

from claimbench.errors import UserError  # noqa: E402
from claimbench.store import record as R  # noqa: E402


def test_record_reads_top_down_samples_last():
    text = R.record_json(rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240))
    keys = [line.split('"')[1] for line in text.splitlines() if line.startswith(' "')]
    assert keys[:8] == ["schema_version", "protocol_version", "verdict", "reason", "value", "ci_low", "ci_high",
                        "published_value"]
    assert keys.index("claimed") < keys.index("hardware") < keys.index("git_commit") < keys.index("correctness")
    assert keys[-2:] == ["kernel", "baseline"]
    assert '  "samples_us": [' in text and len(text.splitlines()) < 200  # a list of numbers is one line


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(created_utc="zzzz"), "created_utc: 'zzzz' is not an ISO-8601 UTC time"),
    (lambda d: d["claimed"].update(metric="bogus"), "claimed: unknown metric 'bogus'"),
    (lambda d: d["claimed"].update(metric=[]), "claimed: unknown metric []"),  # found by the property test
    (lambda d: d["claimed"].update(value=True), "claimed: value True is not a valid claimed value"),
    (lambda d: d["claimed"].update(value=-1.0), "claimed: value -1.0 is not a valid claimed value"),
    (lambda d: d.update(verdict="great"), "verdict: unknown verdict 'great'"),
    (lambda d: d["kernel"].update(rounds=[0]), "kernel: samples_us has 2 entries, rounds 1, processes 2"),
    (lambda d: d["kernel"].update(samples_us=[1.0, 0.0]), "kernel: samples must be positive, finite times"),
    (lambda d: d["kernel"].update(samples_us=[1.0, -3.0]), "kernel: samples must be positive, finite times"),
    # text no runner writes: a 6 MB machine name cost publish and audit 850 MB, a 60 MB reason `table` 7.5 GB
    (lambda d: d.update(hardware={"device": "cpu", "cpu": {"model": "EPYC" + "x" * 600}}),
     "hardware: a name longer than 512 characters"),
    (lambda d: d.update(hardware={"device": "cpu", "cpu": {"model": "AMD E\u0420YC 9654"}}),
     "hardware: the name 'AMD E\\u0420YC 9654' is not printable ASCII"),
    (lambda d: d.update(reason="r" * 8193), "reason: longer than 8192 characters"),
    (lambda d: d.update(blockers=["b" * 8193]), "blockers: longer than 8192 characters"),
])
def test_impossible_records_are_refused_naming_the_field(change, message):
    d = _minimal(kernel={"samples_us": [1.0, 2.0], "rounds": [0, 1], "processes": [0, 0]})
    change(d)
    with pytest.raises(RecordError, match=re.escape(f"x: {message}")):
        parse_record(d, "x")


def test_more_samples_than_the_runner_writes_are_refused(monkeypatch):
    monkeypatch.setattr(R, "MAX_SAMPLES", 4)
    d = _minimal(kernel={"samples_us": [1.0] * 5, "rounds": list(range(5)), "processes": [0] * 5})
    with pytest.raises(RecordError, match="more than 4 samples; more than the runner writes"):
        parse_record(d, "x")


def test_oversized_and_irregular_files_are_refused_unread(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(R.MAX_RECORD_BYTES + 1)  # sparse: reading it would cost 64 MiB
    with pytest.raises(RecordError, match=f"big.json: {R.MAX_RECORD_BYTES + 1} bytes, over the 64 MiB limit"):
        load_record(big)
    with pytest.raises(RecordError, match="/dev/zero: not a regular file"):
        load_record("/dev/zero")
    link = tmp_path / "link.json"
    link.symlink_to(big)
    with pytest.raises(RecordError, match="link.json: a symlink"):
        load_record(link)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(RecordError, match="fifo.json: not a regular file"):
        load_record(fifo)


def test_runner_names_match_the_pattern_and_never_collide(tmp_path):
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    paths = [write_record(tmp_path, rec) for _ in range(3)]
    assert len(set(paths)) == 3 and all(R.RECORD_NAME.match(p.name) for p in paths)
    assert [p.name[-7:] for p in paths[1:]] == ["-2.json", "-3.json"]


def _write_many(args):
    results, n = args
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    return [str(write_record(results, rec)) for _ in range(n)]


def test_concurrent_writers_of_one_claim_each_keep_their_record(tmp_path):
    with mp.get_context("fork").Pool(4) as pool:
        names = [p for chunk in pool.map(_write_many, [(tmp_path, 15)] * 4) for p in chunk]
    files = list((tmp_path / "records" / "softmax-online").iterdir())
    assert len(set(names)) == 60 and len(files) == 60
    assert all(load_record(f).verdict == "verified" for f in files)


def _fail_writes(monkeypatch, err: int):
    real = os.fdopen

    class Full:
        def __init__(self, f):
            self.f = f

        def write(self, data):
            self.f.write(data[:10])
            raise OSError(err, os.strerror(err))

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

    monkeypatch.setattr(os, "fdopen", lambda fd, *a, **kw: Full(real(fd, *a, **kw)))


def test_disk_full_is_one_line_and_leaves_no_half_written_file(tmp_path, monkeypatch):
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    _fail_writes(monkeypatch, errno.ENOSPC)
    with pytest.raises(R.RecordWriteError) as e:
        write_record(tmp_path, rec)
    assert isinstance(e.value, UserError) and "\n" not in str(e.value)
    assert str(e.value).startswith(str(R.record_path(tmp_path, rec)) + ": cannot write the record: No space left")
    assert [p.name for p in (tmp_path / "records" / "softmax-online").iterdir()] == []


def test_an_unwritable_record_is_kept_next_to_the_log_or_printed(tmp_path, capsys):
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    where = R.keep_unwritable(rec, near=tmp_path / "logs" / "softmax-online.log")
    kept = next((tmp_path / "logs").glob("softmax-online.unwritten-record.*.json"))
    assert where == f"kept at {kept}" and load_record(kept) == rec
    (tmp_path / "blocked").write_text("a file, not a folder")
    assert R.keep_unwritable(rec, near=tmp_path / "blocked" / "x.log") == "printed to stderr as JSON"
    assert parse_record(json.loads(capsys.readouterr().err), "stderr") == rec


def test_a_full_disk_leaves_no_cut_copy_of_an_unwritable_record(tmp_path, monkeypatch, capsys):
    """Issue 25: the kept copy was left as a 0-byte file when the disk was full."""
    from pathlib import Path

    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)

    def full(self, data, *a, **kw):
        with open(self, "w") as f:
            f.write(data[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(Path, "write_text", full)
    assert R.keep_unwritable(rec, near=tmp_path / "logs" / "x.log") == "printed to stderr as JSON"
    assert list((tmp_path / "logs").iterdir()) == []
    assert parse_record(json.loads(capsys.readouterr().err), "stderr") == rec


def test_check_writable_says_so_in_one_line(tmp_path):
    (tmp_path / "results").write_text("not a folder")
    with pytest.raises(R.RecordWriteError, match=r"results/records: records cannot be written here .*pass --results"):
        R.check_writable(tmp_path / "results")
    R.check_writable(tmp_path / "ok")
    assert (tmp_path / "ok" / "records").is_dir() and not list((tmp_path / "ok" / "records").iterdir())


def test_stale_temp_files_of_a_killed_write_are_removed(tmp_path):
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    folder = tmp_path / "records" / "softmax-online"
    folder.mkdir(parents=True)
    old, new = folder / ".tmp-killed.json", folder / ".tmp-running.json"
    old.write_text("{")
    new.write_text("{")
    os.utime(old, (1, 1))
    write_record(tmp_path, rec)
    assert not old.exists() and new.exists()


def test_a_record_holds_the_hardware_block_as_the_runner_builds_it():
    from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software

    gpu = GpuInfo(0, "NVIDIA H200", None, "9.0", 132, None, None, "570.1", "12.8",
                  None, None, None, None, None, None, None, False, True)
    hw = Hardware("cuda", (gpu, gpu), CpuInfo("CPU", 2, 2, None, None),
                  Software("3.11", None, None, None, None, None, "abc", False, git_dirty_files=("x.py",)))
    r = parse_record(_minimal(hardware={**hw.to_dict(), "slug": hw.slug, "name": hw.name}), "x")
    assert isinstance(r.hardware["gpus"], tuple) and r.hardware["software"]["git_dirty_files"] == ("x.py",)
    with pytest.raises(RecordError, match=re.escape("x: hardware: gpus has the wrong type (bool)")):
        parse_record(_minimal(hardware={"gpus": True}), "x")


# --- numbers and times that read one way and compare another (an adversarial review, 2026-12-06) ------

@pytest.mark.parametrize("edit", [
    {"floor_us": "NaN"}, {"flops": "Infinity"}, {"value": "-Infinity"}, {"ci_low": "nan"},
    {"kernel": {"median_us": "NaN", "samples_us": [1.0], "rounds": [0], "processes": [0]}},
    {"kernel": {"samples_us": [1.0, "NaN"], "rounds": [0, 0], "processes": [0, 0]}},
])
def test_a_float_spelled_as_nan_or_infinity_is_refused(edit):
    """pydantic's lax mode read the strings as NaN and infinity: `nan > 0` skipped the physics floor, and
    orjson wrote them back as null, so a cold audit, a warm one and publish gave three answers."""
    with pytest.raises(RecordError):
        parse_record(_minimal(**edit), "x")


@pytest.mark.parametrize("when", ["2026-10-\u06601T09:00:00.000000Z", "\uff12026-10-01T09:00:00.000000Z",
                                  "2026-10-01T09:00:00.00000\u0661Z"])
def test_a_time_with_a_digit_that_is_not_ascii_is_refused(when):
    """U+0660 (ARABIC-INDIC DIGIT ZERO) sorts after every ASCII digit: such a date read as newer than
    every real one and brought back a number a later refutation had taken off the list."""
    assert R.normalized_utc(when) is None
    with pytest.raises(RecordError, match="created_utc"):
        parse_record(_minimal(created_utc=when), "x")


def test_a_record_name_with_a_digit_that_is_not_ascii_is_not_a_record_name():
    good = "20261001T090000Z-nvidia-h200-0123456789.json"
    assert R.RECORD_NAME.match(good)
    assert not R.RECORD_NAME.match(good.replace("0", "\u0660", 1))
    assert not R.RECORD_NAME.match(good.replace(".json", "-\u0661.json"))
