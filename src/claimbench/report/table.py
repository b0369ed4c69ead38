"""All records as one table (pandas): filter by claim, hardware and verdict; compare two GPUs.

Built from the index (`read_index`), so 100,000 records tabulate in seconds; the index is checked
against the record files first, so the table never shows a record that changed or is gone.
Record paths read as the list writes them (`results/records/...`), and text from records is
rendered safely (`safetext`): escaped in Markdown, stripped of control characters in CSV.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from claimbench.extras import load
from claimbench.spec.safetext import markdown, plain
from claimbench.store.index import read_index

if TYPE_CHECKING:
    import pandas as pd

COLUMNS = ["claim", "hardware", "date", "verdict", "metric", "value", "ci_low", "ci_high",
           "commit", "dirty", "mode", "machine", "point", "record", "reason"]  # reason last: the longest cell


def records_table(results_dir: Path, *, claim: Optional[str] = None, hardware: Optional[str] = None,
                  verdict: Optional[str] = None, shown: Optional[str] = None) -> pd.DataFrame:
    """One row per readable record, newest first. Filters are globs (`softmax-*`, `*h200*`);
    hardware matches the slug or the display name, case-insensitively. ``shown`` is the results
    folder as the list names it (default: its own name, `results`)."""
    pd = load("table", "pandas", "claimbench table")
    prefix = (shown if shown is not None else Path(results_dir).name).rstrip("/")
    rows = read_index(Path(results_dir)).good
    if claim:
        rows = [s for s in rows if fnmatch.fnmatchcase(s.claim_id, claim)]
    if hardware:
        pat = hardware.lower()
        rows = [s for s in rows if fnmatch.fnmatchcase(s.hardware.lower(), pat)
                or fnmatch.fnmatchcase(s.hardware_name.lower(), pat)]
    if verdict:
        rows = [s for s in rows if s.verdict == verdict]
    df = pd.DataFrame({
        "claim": [s.claim_id for s in rows],
        "point": [f"{s.sweep_axis}={s.sweep_value}" if s.sweep_axis else "" for s in rows],  # "": the claim's params
        "hardware": [s.hardware for s in rows],
        "date": pd.to_datetime([s.when or s.created_utc for s in rows], utc=True, format="ISO8601"),
        "verdict": [s.verdict for s in rows],
        "metric": [s.metric for s in rows],
        "value": pd.array([s.value for s in rows], dtype="Float64"),
        "ci_low": pd.array([s.ci_low for s in rows], dtype="Float64"),
        "ci_high": pd.array([s.ci_high for s in rows], dtype="Float64"),
        "commit": [(s.git_commit or "")[:10] for s in rows],
        "dirty": [s.git_dirty for s in rows],
        "mode": [s.mode for s in rows],
        "machine": [s.machine for s in rows],
        "record": [f"{prefix}/{s.path}" if prefix else s.path for s in rows],
        "reason": [s.reason for s in rows],  # why the verdict, whole: a reader filtering by verdict asks why
    }, columns=COLUMNS)
    return df.sort_values(["date", "claim", "hardware"], ascending=[False, True, True],
                          kind="stable").reset_index(drop=True)


def compare(df: pd.DataFrame, hw_a: str, hw_b: str) -> pd.DataFrame:
    """Per claim, the latest measured record on each GPU, side by side, and the ratio b / a."""
    measured = df[(df["mode"] == "measured") & (df["point"] == "")]  # a sweep point is not the claim's number
    sides = []
    for hw in (hw_a, hw_b):
        pat = hw.lower()
        one = measured[measured["hardware"].map(lambda h, pat=pat: fnmatch.fnmatchcase(h.lower(), pat))]
        one = one.sort_values("date", ascending=False).drop_duplicates("claim")
        sides.append(one.set_index("claim")[["metric", "value", "verdict", "date"]])
    a, b = sides
    out = a.merge(b, how="outer", left_index=True, right_index=True, suffixes=(f" {hw_a}", f" {hw_b}"))
    out.insert(0, "metric", out.pop(f"metric {hw_a}").fillna(out.pop(f"metric {hw_b}")))
    out[f"{hw_b} / {hw_a}"] = out[f"value {hw_b}"] / out[f"value {hw_a}"]
    return out.reset_index().sort_values("claim").reset_index(drop=True)


def _cell(v) -> str:
    pd = load("table", "pandas", "claimbench table")
    if v is None or v is pd.NA or (isinstance(v, float) and v != v):
        return ""
    if isinstance(v, pd.Timestamp):
        return v.strftime("%Y-%m-%d %H:%M")
    if isinstance(v, float):
        return f"{v:.4g}"
    return markdown(str(v))


def _column(values) -> list[str]:
    """One column's cells; equal values are rendered once (a table repeats its claims, machines
    and verdicts thousands of times)."""
    seen: dict = {}
    out = []
    for v in values:
        try:
            cell = seen[v]
        except KeyError:
            cell = seen[v] = _cell(v)
        except TypeError:  # unhashable
            cell = _cell(v)
        out.append(cell)
    return out


def render(df: pd.DataFrame, fmt: str = "md") -> str:
    """md (CI as one column), csv, or json (records, ISO dates)."""
    if fmt == "csv":
        return df.map(lambda v: _csv_cell(plain(v)) if isinstance(v, str) else v).to_csv(index=False)
    if fmt == "json":
        return json.dumps(json.loads(df.to_json(orient="records", date_format="iso")), indent=1)
    if fmt != "md":
        raise ValueError(f"unknown format {fmt!r}; use md, csv or json")
    names = list(df.columns)
    columns = {name: _column(df[name].tolist()) for name in names if name not in ("ci_low", "ci_high")}
    if "ci_low" in df and "ci_high" in df:
        lows, highs = _column(df["ci_low"].tolist()), _column(df["ci_high"].tolist())
        names = [n for n in names if n not in ("ci_low", "ci_high")]
        at = names.index("value") + 1 if "value" in names else len(names)
        names.insert(at, "CI")
        columns["CI"] = [f"[{lo}, {hi}]" if lo else "" for lo, hi in zip(lows, highs)]
    lines = ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(row) + " |" for row in zip(*(columns[n] for n in names))]
    return "\n".join(lines) + "\n"


def _csv_cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: one that opens like a formula (`=`, `+`, `-`, `@`, a tab
    or a carriage return) gets a leading quote, so `=HYPERLINK(...)` from a record is never run (OWASP's
    CSV injection advice; found by an adversarial review, 2026-12-06). A negative number is not a string."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
