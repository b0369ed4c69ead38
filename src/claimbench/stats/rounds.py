"""Each round's median of each side: the observations the bootstrap resamples (`resample.py`).

A round is one block of consecutive samples of one process; its median, not its samples, is what
the CI is built on, so that drift within a round does not pass for precision. Audit asks this of
100,000 records at once, so every side's rounds are found with one sort, and the runner's own
layout (round after round, no NaN) with a cheaper row-wise sort.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from claimbench.stats.samples import Samples


def round_medians(side: Samples) -> tuple[np.ndarray, np.ndarray]:
    """(keys, medians) per round, sorted by key; a key is ``process << 32 | round``."""
    return round_medians_many([side])[0]


def round_medians_many(sides: Sequence[Samples]) -> list[tuple[np.ndarray, np.ndarray]]:
    """``round_medians`` of many sides with one sort: each (side, process, round) is a group."""
    xs: list[float] = []
    ps: list[int] = []
    rs: list[int] = []
    sizes = []
    for side in sides:
        if not (len(side.samples_us) == len(side.rounds) == len(side.processes)):
            raise ValueError("samples_us, rounds and processes differ in length")
        xs.extend(side.samples_us)
        ps.extend(side.processes)
        rs.extend(side.rounds)
        sizes.append(len(side.samples_us))
    empty = (np.zeros(0, dtype=np.int64), np.zeros(0))
    if not xs:
        return [empty for _ in sides]
    x = np.array(xs, dtype=np.float64)
    procs, rounds = np.array(ps, dtype=np.int64), np.array(rs, dtype=np.int64)
    if min(procs.min(), rounds.min()) < 0 or max(procs.max(), rounds.max()) >= 1 << 31:
        raise ValueError("round and process indices must lie in [0, 2**31)")
    keys = (procs << 32) | rounds
    side_of = np.repeat(np.arange(len(sides), dtype=np.int64), sizes)
    medians, starts = _grouped_medians(x, keys, side_of)
    if medians is None:  # rounds out of order, or of different sizes: sort everything
        order = np.lexsort((x, keys, side_of))
        x, keys, side_of = x[order], keys[order], side_of[order]
        new = np.ones(x.size, dtype=bool)
        new[1:] = (keys[1:] != keys[:-1]) | (side_of[1:] != side_of[:-1])
        starts = np.flatnonzero(new)
        ends = np.append(starts[1:], x.size)
        medians = (x[starts + (ends - starts - 1) // 2] + x[starts + (ends - starts) // 2]) / 2
    gkeys, gside = keys[starts], side_of[starts]
    cut = np.searchsorted(gside, np.arange(len(sides) + 1))
    return [(gkeys[cut[n]:cut[n + 1]], medians[cut[n]:cut[n + 1]]) for n in range(len(sides))]


def _grouped_medians(x, keys, side_of):
    """The runner's own layout, fast: each side's samples stored round after round. Rounds are
    padded to one width with +inf and sorted row-wise, instead of sorting everything by three
    keys. Returns (medians, group starts), or (None, None) for any other layout."""
    in_order = (keys[1:] >= keys[:-1]) | (side_of[1:] != side_of[:-1])
    if not bool(in_order.all()) or bool(np.isnan(x).any()):
        return None, None
    starts = np.concatenate(([0], np.flatnonzero((keys[1:] != keys[:-1]) | (side_of[1:] != side_of[:-1])) + 1))
    sizes = np.diff(np.append(starts, x.size))
    width = int(sizes.max())
    if width * len(starts) > 4 * x.size:  # a few huge rounds among many small: sorting is cheaper
        return None, None
    group = np.repeat(np.arange(len(starts)), sizes)
    grid = np.full((len(starts), width), np.inf)
    grid[group, np.arange(x.size) - starts[group]] = x
    ranked = np.sort(grid, axis=1)
    rows = np.arange(len(starts))
    return (ranked[rows, (sizes - 1) // 2] + ranked[rows, sizes // 2]) / 2, starts
