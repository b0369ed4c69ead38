"""Two runs side by side: for each claim on each machine, did B get faster, slower, or stay the same?

nvbench-compare and `asv compare` answer this for a benchmark suite; here the unit is a claim's
measured value (a speedup, a time, a rate) with its 95% interval, taken from records. A is the
reference run, B the new one; each is a record file or a folder of records (a results folder, an
unpacked CI artifact). In a folder, each (claim, hardware) pair is represented by its latest
record that carries a number. Two single files are compared whatever their hardware (the row
says when it differs).

The change, with r = B / A (A / B for `time_us`, where less is better) and a threshold t:
- SAME: |r - 1| <= t;
- FASTER or SLOWER: beyond t, and the two intervals do not overlap;
- AMBIGUOUS: beyond t, but the intervals overlap: this noise cannot tell;
- MISSING: A has a number and B has none (no record, or one without a value);
- NEW: only B has one;
- REFUSED: a record that audit's own check rejects (store/recordcheck.py) is compared with nothing.
A gate fails on SLOWER, MISSING and REFUSED (and AMBIGUOUS when strict): a comparison that could
not be made is never a pass.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Optional

from claimbench.store.record import Record, load_record, normalized_utc

DEFAULT_THRESHOLD = 0.05


class Change(str, enum.Enum):
    SAME = "SAME"
    FASTER = "FASTER"
    SLOWER = "SLOWER"
    AMBIGUOUS = "AMBIGUOUS"
    MISSING = "MISSING"
    NEW = "NEW"
    REFUSED = "REFUSED"


FAILING = frozenset({Change.SLOWER, Change.MISSING, Change.REFUSED})


@dataclass(frozen=True)
class Side:
    """One run's number for a claim on a machine, and the record it came from."""

    path: str
    hardware: str
    metric: str
    value: Optional[float]
    ci_low: Optional[float]
    ci_high: Optional[float]
    verdict: str
    problem: str = ""  # why audit's check refuses the record, or ""


@dataclass(frozen=True)
class Row:
    claim_id: str
    hardware: str
    change: Change
    ratio: Optional[float]  # > 1: B is better (faster, or a higher rate)
    a: Optional[Side]
    b: Optional[Side]
    note: str

    def to_json(self) -> dict:
        def side(s: Optional[Side]) -> Optional[dict]:
            return None if s is None else {"path": s.path, "hardware": s.hardware, "metric": s.metric, "value": s.value,
                                           "ci_low": s.ci_low, "ci_high": s.ci_high, "verdict": s.verdict}
        return {"claim_id": self.claim_id, "hardware": self.hardware, "change": self.change.value,
                "ratio": self.ratio, "a": side(self.a), "b": side(self.b), "note": self.note}


def has_number(s: Side) -> bool:
    return s.value is not None and s.ci_low is not None and s.ci_high is not None and s.value > 0


def load_side(path: Path) -> tuple[tuple[str, str], Side, str]:
    """((claim id, hardware slug), the side, normalized created_utc) of one record file, read
    through the bounded reader and checked as audit checks it."""
    from claimbench.store.recordcheck import check_record

    rec: Record = load_record(path)
    problems = check_record(rec)
    side = Side(str(path), rec.hardware_slug, str(rec.claimed.get("metric", "")), rec.value, rec.ci_low, rec.ci_high,
                rec.verdict, problem=f"{problems[0][0]}: {problems[0][1]}" if problems else "")
    # a sweep point compares with the same point only: `cpu-softmax at cols=1024` is a row of its own
    name = rec.claim_id + (f" at {rec.sweep_point.label}" if rec.sweep_point else "")
    return (name, rec.hardware_slug), side, normalized_utc(rec.created_utc) or ""


def collect(paths: Iterable[Path]) -> dict[tuple[str, str], Side]:
    """(claim id, hardware) -> the latest record with a number (else the latest) under ``paths``."""
    best: dict[tuple[str, str], tuple[bool, str, Side]] = {}
    for path in paths:
        key, side, when = load_side(path)
        rank = (has_number(side) and not side.problem, when, side)
        if key not in best or rank[:2] > best[key][:2]:
            best[key] = rank
    return {k: v[2] for k, v in best.items()}


def judge(a: Side, b: Side, threshold: float) -> tuple[Change, Optional[float], str]:
    """The change from A to B, its ratio, and a note."""
    if a.problem or b.problem:
        which = "A" if a.problem else "B"
        return Change.REFUSED, None, f"{which}'s record is refused: {(a.problem or b.problem)}"
    if not has_number(a):
        return Change.NEW, None, f"A has no number ({a.verdict})"
    if not has_number(b):
        return Change.MISSING, None, f"B has no number ({b.verdict})"
    if a.metric != b.metric:
        return Change.REFUSED, None, f"A measures {a.metric}, B {b.metric}: not the same claim"
    assert a.value and b.value and a.ci_low is not None and a.ci_high is not None \
        and b.ci_low is not None and b.ci_high is not None  # has_number
    ratio = a.value / b.value if a.metric == "time_us" else b.value / a.value
    overlap = a.ci_low <= b.ci_high and b.ci_low <= a.ci_high
    if abs(ratio - 1) <= threshold:
        return Change.SAME, ratio, ""
    if overlap:
        return Change.AMBIGUOUS, ratio, "beyond the threshold, but the 95% intervals overlap: rerun both with more processes"
    return (Change.FASTER if ratio > 1 else Change.SLOWER), ratio, ""


def compare(a: dict[tuple[str, str], Side], b: dict[tuple[str, str], Side], threshold: float = DEFAULT_THRESHOLD
            ) -> list[Row]:
    """One row per (claim, hardware) in either run, sorted."""
    rows = []
    for key in sorted(set(a) | set(b)):
        sa, sb = a.get(key), b.get(key)
        if sa is None:
            assert sb is not None
            rows.append(Row(key[0], key[1], Change.NEW, None, None, sb, "only in B"))
        elif sb is None:
            change = Change.MISSING if has_number(sa) else Change.NEW
            rows.append(Row(key[0], key[1], change, None, sa, None, "no record in B"))
        else:
            change, ratio, note = judge(sa, sb, threshold)
            rows.append(Row(key[0], key[1], change, ratio, sa, sb, note))
    return rows


def compare_files(a: Path, b: Path, threshold: float = DEFAULT_THRESHOLD) -> Row:
    """Two single records, whatever machines they ran on."""
    ka, sa, _ = load_side(a)
    kb, sb, _ = load_side(b)
    change, ratio, note = judge(sa, sb, threshold)
    if ka[0] != kb[0]:
        change, ratio, note = Change.REFUSED, None, f"A is a record of {ka[0]}, B of {kb[0]}: not the same claim"
    elif ka[1] != kb[1]:
        note = "; ".join(x for x in (note, f"different hardware: A {ka[1]}, B {kb[1]}") if x)
    return Row(ka[0], ka[1] if ka[1] == kb[1] else f"{ka[1]} -> {kb[1]}", change, ratio, sa, sb, note)
