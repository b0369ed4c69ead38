"""table: every readable record as a row; filters; md/csv/json; two GPUs side by side."""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
import recordkit as rk

from claimbench.report.table import compare, records_table, render
from claimbench.store.record import load_record


@pytest.fixture
def results(tmp_path):
    root, recs = rk.standard_tree(tmp_path / "proj")
    return root / "results", recs


def test_one_row_per_record_newest_first(results):
    res, recs = results
    df = records_table(res)
    assert len(df) == len(recs)
    assert list(df.columns[:6]) == ["claim", "hardware", "date", "verdict", "metric", "value"]
    assert df["date"].is_monotonic_decreasing
    row = df[df["record"].str.endswith(recs["softmax_h200"].name)].iloc[0]
    assert (row["claim"], row["hardware"], row["verdict"], row["commit"]) == (
        "softmax-online", "nvidia-h200", "verified", rk.Record.model_validate_json(recs["softmax_h200"].read_text()).git_commit[:10])
    assert row["ci_low"] < row["value"] < row["ci_high"]


def test_filters(results):
    res, _ = results
    assert set(records_table(res, claim="softmax-*")["claim"]) == {"softmax-online", "softmax-online-bw"}
    assert set(records_table(res, hardware="*H100*")["hardware"]) == {"nvidia-h100"}
    assert set(records_table(res, hardware="nvidia-b200")["claim"]) == {"blackwell-time"}
    assert set(records_table(res, verdict="refuted")["claim"]) == {"deepgemm-fp8", "transpose-tiled"}


def test_corrupt_records_have_no_row(results):
    res, recs = results
    recs["gemm_h200"].write_text("{")
    assert len(records_table(res)) == len(recs) - 1


def test_formats(results):
    res, _ = results
    df = records_table(res, claim="transpose-tiled")
    md = render(df, "md").splitlines()
    assert md[0].startswith("| claim | hardware | date | verdict | metric | value | CI |")
    assert "| transpose-tiled | nvidia-h200 | 2026-10-01 09:00 | refuted | speedup | 1.067 | [1.06, 1.073] |" in md[2]
    csv = render(df, "csv").splitlines()
    assert csv[0].startswith("claim,hardware,date,verdict,metric,value,ci_low,ci_high") and len(csv) == 3
    rows = json.loads(render(df, "json"))
    assert rows[0]["claim"] == "transpose-tiled" and rows[0]["date"].startswith("2026-10-01T09:00:00")
    with pytest.raises(ValueError):
        render(df, "xml")


def test_compare_two_gpus(results):
    res, _ = results
    cmp = compare(records_table(res), "nvidia-h200", "nvidia-h100")
    softmax = cmp[cmp["claim"] == "softmax-online"].iloc[0]
    latest = load_record(results[1]["softmax_h200"]).value
    assert softmax["value nvidia-h200"] == pytest.approx(latest)  # the latest H200 run
    assert softmax["nvidia-h100 / nvidia-h200"] == pytest.approx(
        softmax["value nvidia-h100"] / softmax["value nvidia-h200"])
    gemm = cmp[cmp["claim"] == "deepgemm-fp8"].iloc[0]
    assert gemm["verdict nvidia-h200"] == "refuted" and pd.isna(gemm["value nvidia-h100"])
    assert "blackwell-time" not in set(cmp["claim"])


def test_records_are_named_as_the_list_names_them(tmp_path, capsys):
    from claimbench.cli import main

    root, recs = rk.standard_tree(tmp_path / "proj")
    assert main(["--root", str(root), "table", "--format", "csv", "--claim", "scan-decoupled"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted(r["record"] for r in rows) == sorted(
        f"results/{p.relative_to(root / 'results').as_posix()}" for k, p in recs.items() if k.startswith("scan"))
    assert all(r["machine"] in ("H200", "H100 80GB HBM3") for r in rows)
    assert all(r["reason"] for r in rows)  # why each verdict, whole (issue 26: `table` had no reason column)


def test_a_csv_cell_never_opens_as_a_formula(results):
    """A record's hardware slug of `=HYPERLINK(...)` reached a spreadsheet as a formula (OWASP's CSV
    injection; an adversarial review, 2026-12-06). Numbers keep their sign."""
    res, recs = results
    rec = load_record(recs["softmax_h200"])
    hw = {**rec.hardware, "slug": '=HYPERLINK("http://evil.example","H200")'}
    path = rk.write(res.parent, rec.model_copy(update={"hardware": hw, "created_utc": "2026-11-30T10:00:00.000000Z"}))
    rows = list(csv.DictReader(io.StringIO(render(records_table(res), "csv"))))
    row = next(r for r in rows if r["record"].endswith(path.name))
    assert row["hardware"].startswith("'=HYPERLINK")
    assert all(not v.startswith(("=", "+", "@")) for r in rows for v in r.values())


def test_an_index_that_git_tracks_is_not_believed_by_table_show_or_site(tmp_path, capsys):
    """A committed `results/index.jsonl` with one line's value forged (path, size and sha256 kept) showed
    9.87x for a 1.62x record in `site`, `table` and `show` (an adversarial review); `publish` and `audit`
    already ignored it. Every reader of the index now reads the records instead, and leaves the file be."""
    import json

    import recordkit as rk

    from claimbench.cli import main
    from claimbench.store.index import INDEX_NAME, read_index

    root, _ = rk.standard_tree(tmp_path / "proj")
    read_index(root / "results")  # writes the index
    index = root / "results" / INDEX_NAME
    lines = [json.loads(x) for x in index.read_text().splitlines()]
    target = next(d for d in lines if d.get("value") and 1.6 < d["value"] < 1.65)
    target.update(value=9.87, ci_low=9.80, ci_high=9.95, published_value=9.87)
    index.write_text("".join(json.dumps(d) + "\n" for d in lines))
    forged = index.read_bytes()
    rk.git(root, "add", "-f", f"results/{INDEX_NAME}")
    rk.commit_all(root, "an index")
    capsys.readouterr()
    assert main(["--root", str(root), "table", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert "9.87" not in out and "1.62" in out, out
    assert index.read_bytes() == forged  # tracked: read past, never rewritten
