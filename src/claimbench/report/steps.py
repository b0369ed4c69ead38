"""Changes across commits in a claim's history: where a number got faster or slower, per machine.

asv marks the commits where a benchmark's value steps; here the unit is a claim's measured value
with its 95% interval, and a step is judged as `compare` judges two runs (report/compare.py): the
latest run of each commit against the latest run of the commit before it on the same machine.
FASTER and SLOWER need the intervals apart and the ratio beyond the threshold; SAME and AMBIGUOUS
are kept too, so a reader sees that a commit was measured and changed nothing that could be told.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from claimbench.report.compare import DEFAULT_THRESHOLD, Change, Side, has_number, judge
from claimbench.store.summary import Summary


@dataclass(frozen=True)
class Step:
    """From one commit's latest run to the next commit's, on one machine."""

    machine: str
    before: Summary
    after: Summary
    change: Change
    ratio: Optional[float]  # > 1: the later commit is better (faster, or a higher rate)
    note: str

    @property
    def marked(self) -> bool:
        """Drawn on the history: a change the intervals can tell."""
        return self.change in (Change.FASTER, Change.SLOWER)

    @property
    def better(self) -> bool:
        return self.change == Change.FASTER

    @property
    def label(self) -> str:
        ratio = f" {self.ratio:.2f}x" if self.ratio is not None else ""
        return f"{self.change.value.lower()}{ratio} at {(self.after.git_commit or '?')[:7]}"


def _side(s: Summary) -> Side:
    return Side(s.path, s.hardware, s.metric, s.value, s.ci_low, s.ci_high, s.verdict)


def steps(runs: Sequence[Summary], threshold: float = DEFAULT_THRESHOLD) -> list[Step]:
    """Every commit-to-commit step among ``runs`` (one claim's own-point measured records, any
    order), per machine in time order. Runs without a number or a commit are left out: a step
    needs two numbers and two commits to name."""
    by_machine: dict[str, list[Summary]] = {}
    for s in sorted(runs, key=lambda s: (s.when or s.created_utc, s.path)):
        if s.git_commit and has_number(_side(s)):
            by_machine.setdefault(s.machine or s.hardware_name or s.hardware, []).append(s)
    out = []
    for machine, mine in sorted(by_machine.items()):
        latest: dict[str, Summary] = {}  # commit -> its latest run, in the order commits were first measured
        for s in mine:  # a commit keeps its place (first measured) and takes its latest number
            latest[str(s.git_commit)] = s
        order = list(latest.values())
        for a, b in zip(order, order[1:]):
            change, ratio, note = judge(_side(a), _side(b), threshold)
            out.append(Step(machine, a, b, change, ratio, note))
    return out
