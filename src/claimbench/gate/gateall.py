"""Checking many claim files at once: on forked workers when there are many, then the one rule
that spans files (a claim id names one claim).

`check` of 10,000 claims is bound by parsing and the static rules, each file alone (`policy.gate_file`),
so files are split over forked workers from `PARALLEL_FROM` files on. The file facts a worker computed
come back with its results (a forked worker exits without `atexit`, gate/facts.py).
"""

from __future__ import annotations

import gc
import os
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Iterator, Optional

from claimbench.gate.facts import keep, take_new
from claimbench.gate.policy import CheckResult, gate_file
from claimbench.gate.srcgraph import resolving
from claimbench.spec.problem import Problem


def _check_many(paths: list[Path], root: Path, listing) -> tuple[list[tuple[str, CheckResult]], dict]:
    """A forked worker's share, and the file facts it computed (a worker exits without `atexit`,
    so the parent keeps them: gate/facts.py)."""
    with resolving():  # one pass: each path is resolved once (`srcgraph.resolving`)
        return [(str(p), gate_file(p, root, listing)) for p in paths], take_new()


PARALLEL_FROM = 400  # below this, starting workers costs more than it saves


def gate_all(paths: Iterable[Path], root: Path, listing=None, *,
                known: Optional[dict[str, CheckResult]] = None) -> list[CheckResult]:
    """Check many files, then the rule that needs them all: ids are unique.

    ``known`` maps a path string to its `gate_file` result from earlier in this command (audit
    checks the claim files while it reads records); those files are not checked again."""
    paths = [Path(p) for p in paths]
    if known:
        cached = [known.get(str(p)) for p in paths]
        rest = [p for p, r in zip(paths, cached) if r is None]
        fresh: Iterator[CheckResult] = iter(gate_all(rest, root, listing)) if rest else iter(())
        return unique_ids([r if r is not None else next(fresh) for r in cached])
    workers = min(os.cpu_count() or 1, 8)
    forked = _gate_forked(paths, root, listing, workers=workers) if len(paths) >= PARALLEL_FROM and workers > 1 else None
    if forked is None:
        with resolving():
            forked = [gate_file(p, root, listing) for p in paths]
    return unique_ids(forked)


def _gate_forked(paths: list[Path], root: Path, listing, *, workers: int) -> Optional[list[CheckResult]]:
    """`gate_file` of each path on forked workers, in order; None where the system cannot fork."""
    import multiprocessing as mp  # here: a plain `check` of a few claims need not pay for its import

    if "fork" not in mp.get_all_start_methods():
        return None
    chunks = [paths[i::workers] for i in range(workers)]
    gc.freeze()  # audit forks this from a process holding 100,000 summaries: keep their pages shared
    try:
        with mp.get_context("fork").Pool(workers) as pool:
            parts = pool.starmap(_check_many, [(c, root, listing) for c in chunks])
    finally:
        gc.unfreeze()
    for _, new in parts:
        keep(new)
    by_path = {r_path: r for part, _ in parts for r_path, r in part}
    return [by_path[str(p)] for p in paths]

def gate_files(paths: Iterable[Path], root: Path, listing=None) -> dict[str, CheckResult]:
    """`gate_file` of each path, by path string, in this process (for `gate_all(known=...)`)."""
    with resolving():
        return {str(Path(p)): gate_file(Path(p), root, listing) for p in paths}


def unique_ids(results: list[CheckResult]) -> list[CheckResult]:
    """The one rule that spans files: a claim id names one claim. The first file keeps the id; each
    later one gets a problem. Idempotent, so a result that already carries it is not marked twice
    (the check cache merges cached and fresh results and applies this again)."""
    first: dict[str, str] = {}
    for r in results:
        if r.claim is not None:
            first.setdefault(r.claim.id, r.path)
    out = []
    for r in results:
        if (r.claim is not None and first[r.claim.id] != r.path
                and not any(x.key == "id" and _DUPLICATE in x.message for x in r.problems)):
            r = replace(r, problems=r.problems + (
                Problem(r.path, 1, "id", f"`{r.claim.id}` {_DUPLICATE} {first[r.claim.id]}; ids are unique"),))
        out.append(r)
    return out


_DUPLICATE = "is also the id of"
