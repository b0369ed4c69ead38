"""`--summary PATH`: this run as a Markdown table, appended, as GitHub's job summary expects.

GitHub renders `$GITHUB_STEP_SUMMARY` and refuses one over 1 MiB, so the file (what was there
before included) is kept under that: rows that do not fit are counted in a closing note that
points to the records, never silently dropped. Cells are escaped so a reason cannot break the table
(and pass through `safetext.plain`, so no control or bidi character reaches the page).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from claimbench.spec.safetext import plain
from claimbench.stats.status import Status

LIMIT_BYTES = 1024 * 1024
MARGIN_BYTES = 1024
REASON_CHARS = 300
MARKS = {Status.VERIFIED: "✅", Status.SKIPPED: "⏭️"}


def _cell(text: object, limit: int = REASON_CHARS) -> str:
    s = plain(str(text))  # no control, bidi or zero-width character, one line
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return (s.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
            .replace("`", "&#96;"))


def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _measured(o) -> str:
    if o.value is None:
        return "-"
    if o.ci_low is None or o.ci_high is None:
        return _num(o.value)
    return f"{_num(o.value)} [{_num(o.ci_low)}, {_num(o.ci_high)}]"


def _row(o) -> str:
    claimed = "-" if o.claimed_value is None else f"{o.metric} {o.claimed_value:g}"
    mark = MARKS.get(o.status, "❌")
    cells = [f"`{_cell(o.claim_id, 120)}`", _cell(o.hardware, 60), _measured(o), _cell(claimed, 60),
             f"{mark} {o.status.value}", _cell(o.reason)]
    return "| " + " | ".join(cells) + " |\n"


def _header(hw, outcomes: list) -> str:
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status.value] = counts.get(o.status.value, 0) + 1
    tally = ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no claims run"
    sw = hw.software
    where = f"{len(hw.gpus)} x {hw.name}" if hw.device == "cuda" and len(hw.gpus) > 1 else hw.name
    facts = [f"device `{hw.device}`", f"torch {sw.torch or '-'}"]
    if hw.gpus and hw.gpus[0].driver_version:
        facts.append(f"driver {hw.gpus[0].driver_version}")
    if sw.git_commit:
        facts.append(f"commit `{sw.git_commit[:12]}`{' (dirty)' if sw.git_dirty else ''}")
    return (f"### claimbench: {len(outcomes)} claim(s) on {_cell(where, 80)}\n\n"
            f"{', '.join(facts)}. Result: {tally}.\n\n"
            "| claim | hardware | measured [95% CI] | claimed | verdict | reason |\n"
            "|---|---|---|---|---|---|\n")


def render(hw, outcomes: Iterable, budget_bytes: int) -> str:
    """The section for this run, at most ``budget_bytes`` of UTF-8 (empty if even the header won't fit)."""
    outcomes = list(outcomes)
    text = _header(hw, outcomes)
    used = len(text.encode())
    if used > budget_bytes:
        return ""
    shown = 0
    for o in outcomes:
        row = _row(o)
        n = len(row.encode())
        if used + n > budget_bytes - 200:  # keep room for the closing note
            break
        text += row
        used += n
        shown += 1
    if shown < len(outcomes):
        text += (f"\n_{len(outcomes) - shown} more claim(s) not shown: a job summary is capped at 1 MiB. "
                 "Every claim's record is in the uploaded records artifact._\n")
    return text + "\n"


def write_summary(path: Path, hw, outcomes: Iterable, *, limit_bytes: int = LIMIT_BYTES) -> None:
    """Append this run's table to ``path`` (created if missing), keeping the file under ``limit_bytes``."""
    path = Path(path)
    try:
        existing = path.stat().st_size
    except FileNotFoundError:
        existing = 0
    section = render(hw, outcomes, limit_bytes - MARGIN_BYTES - existing)
    if section:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write(section)
