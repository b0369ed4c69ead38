"""The paired block bootstrap behind every CI, batched because ``audit`` recomputes it for every record.

Rounds are the blocks: each round's median is one observation. A resample picks processes
(``--repeat``) with replacement, then rounds within each picked process, and kernel and baseline
rounds stay paired so shared drift cancels. The statistic is the metric of the two medians of
round medians; the point estimate is the same statistic on the data, and the CI its 2.5th and
97.5th percentiles over resamples (numpy's 'linear' rule).

The draws depend only on the shape of the data and a fixed seed, so the same samples always give
the same CI (a hand-edited record is detectable) and records of one shape share their draws.
Each resample's median is read off a running tally instead of sorting the resample: the numbers
are the ones a sort would give, bit for bit, at a fraction of the cost.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Sequence

import numpy as np

from claimbench.stats.samples import MIN_ROUNDS, Request, Samples, median, median_of_sorted, metric_value  # noqa: F401 (re-exported)

RESAMPLES = 2000
SEED = 20240601
_BATCH_BYTES = 4 << 20  # bound on the (rows, rounds, resamples) tally gathered at once
_TALLY_CACHE_BYTES = 16 << 20  # a bigger tally (thousands of rounds) is drawn in slices, never whole
_SLICE_BYTES = 32 << 20  # bound on one slice's random draws
_WIDE = 512  # above this many rounds, medians come from a running sum, not a width² table


def bootstrap_ci(metric: str, kernel: Samples, baseline: Samples, *, flops=None, nbytes=None,
                 floor_us=None, resamples: int = RESAMPLES) -> tuple[float, float, float]:
    """(value, low, high) for one pair of sides; low and high are NaN below MIN_ROUNDS rounds."""
    return bootstrap_many([Request(metric, kernel, baseline, flops, nbytes, floor_us)], resamples)[0]


def bootstrap_many(requests: Sequence[Request], resamples: int = RESAMPLES) -> list[tuple[float, float, float]]:
    """(value, low, high) for each request; requests of one shape are computed together."""
    out: list = [None] * len(requests)
    groups: dict[tuple, list] = {}
    sides = [s for rq in requests for s in ((rq.kernel, rq.baseline) if rq.metric == "speedup" else (rq.kernel,))]
    per_side = iter(round_medians_many(sides))
    for i, rq in enumerate(requests):
        paired = rq.metric == "speedup"
        kkeys, kvals = next(per_side)
        keys = kkeys
        bvals = None
        if paired:
            bkeys, bvals = next(per_side)
            # both int64 slices of one array: equal bytes are equal keys (0.1 us; array_equal 1.7 us)
            if kkeys.tobytes() != bkeys.tobytes():  # a round one side lacks is dropped from both
                keys = np.intersect1d(kkeys, bkeys, assume_unique=True)
                kvals, bvals = kvals[np.searchsorted(kkeys, keys)], bvals[np.searchsorted(bkeys, keys)]
        kmed = median_of_sorted(sorted(kvals.tolist())) if len(keys) else math.nan
        bmed = median_of_sorted(sorted(bvals.tolist())) if bvals is not None and len(keys) else math.nan
        value = metric_value(rq.metric, kmed, bmed, flops=rq.flops, nbytes=rq.nbytes, floor_us=rq.floor_us)
        out[i] = (value, math.nan, math.nan)
        if len(keys) < MIN_ROUNDS:
            continue
        if keys[-1] >> 32 == 0:  # one process, the usual case (keys are sorted and non-negative)
            shape = (1, (len(keys),))
        else:
            _, counts = np.unique(keys >> 32, return_counts=True)
            shape = (len(counts), tuple(counts.tolist()))
        groups.setdefault(shape, []).append((i, kvals, bvals))
    for (nprocs, counts), members in groups.items():
        if sum(counts) * resamples * 4 > _TALLY_CACHE_BYTES:  # thousands of rounds: slice the resamples
            for i, kv, bv in members:
                rows = np.stack([kv] if bv is None else [kv, bv])
                parts = [_resampled_medians(rows, t, nd) for t, nd in _tally_slices(nprocs, counts, resamples)]
                medians = np.concatenate(parts, axis=1)
                rq = requests[i]
                stat = metric_value(rq.metric, medians[0], medians[1] if bv is not None else None,
                                    flops=rq.flops, nbytes=rq.nbytes, floor_us=rq.floor_us)
                out[i] = (out[i][0], *_ci95(np.asarray(stat)[None, :])[0])
            continue
        tally, ndraws = _draw_tally(nprocs, counts, resamples)
        per_batch = max(1, _BATCH_BYTES // (2 * tally.size * tally.itemsize))
        for start in range(0, len(members), per_batch):
            batch = members[start:start + per_batch]
            arrays = [v for _, kv, bv in batch for v in ((kv,) if bv is None else (kv, bv))]
            medians = _resampled_medians(np.stack(arrays), tally, ndraws)
            if all(bv is not None and requests[i].metric == "speedup" for i, _, bv in batch):
                table = medians[1::2] / medians[0::2]  # every row's baseline / kernel, as metric_value divides
            else:
                at = 0
                stats = []
                for i, _, bv in batch:
                    rq = requests[i]
                    km = medians[at]
                    bm = medians[at + 1] if bv is not None else None
                    at += 1 if bv is None else 2
                    stats.append(metric_value(rq.metric, km, bm, flops=rq.flops, nbytes=rq.nbytes, floor_us=rq.floor_us))
                table = np.stack(stats)
            for (i, _, _), (low, high) in zip(batch, _ci95(table)):
                out[i] = (out[i][0], low, high)
    return out


def _draw_tally(nprocs: int, counts: tuple, resamples: int) -> tuple[np.ndarray, int]:
    """How often each round (rows, in key order) is drawn in each resample (columns), and the
    number of draws per resample: each resample picks ``nprocs`` processes, then ``max(counts)``
    rounds within each picked process. Kept for reuse up to a byte budget: records of one shape
    share their draws, but a worker must not hoard hundreds of megabytes of them."""
    key = (nprocs, counts, resamples)
    hit = _TALLIES.get(key)
    if hit is not None:
        return hit
    slices = list(_tally_slices(nprocs, counts, resamples))
    tally = slices[0][0] if len(slices) == 1 else np.ascontiguousarray(np.concatenate([t for t, _ in slices], axis=1))
    out = (tally, slices[0][1])
    while _TALLIES and sum(t.nbytes for t, _ in _TALLIES.values()) + tally.nbytes > _TALLY_CACHE_BYTES * 4:
        _TALLIES.pop(next(iter(_TALLIES)))
    _TALLIES[key] = out
    return out


_TALLIES: dict = {}


def _tally_slices(nprocs: int, counts: tuple, resamples: int):
    """The tally in slices of resamples, drawn from one random stream in the order a single
    draw would take: the same numbers, in memory linear in the rounds with a small constant."""
    rmax = max(counts)
    rng = np.random.default_rng(SEED)
    pchoice = rng.integers(0, nprocs, size=(resamples, nprocs))
    counts_a = np.asarray(counts)
    offsets = np.concatenate(([0], np.cumsum(counts)[:-1]))
    total = int(sum(counts))
    ndraws = nprocs * rmax
    dtype = np.uint8 if ndraws < 255 else np.int32  # narrow lanes are several times faster
    per = max(1, min(resamples, _SLICE_BYTES // (8 * (nprocs * rmax + total))))
    for start in range(0, resamples, per):
        n = min(per, resamples - start)
        pc = pchoice[start:start + n]
        u = rng.random((n, nprocs, rmax))
        ridx = (u * counts_a[pc][:, :, None]).astype(int)
        item = offsets[pc][:, :, None] + ridx + (np.arange(n) * total)[:, None, None]
        tally = np.bincount(item.ravel(), minlength=n * total).reshape(n, total).T
        yield np.ascontiguousarray(tally, dtype=dtype), ndraws


def _resampled_medians(values: np.ndarray, tally: np.ndarray, ndraws: int) -> np.ndarray:
    """(rows, T) observations -> (rows, resamples) medians of the resamples.

    With a row sorted, the q-th smallest draw of a resample is the first sorted value whose
    running tally exceeds q, so counting the positions whose running tally is still <= q finds
    it; for an even count the median is (a + b) / 2, as a sort would give.
    """
    rows, width = values.shape
    order = np.argsort(values, axis=1, kind="stable")
    ranked = np.take_along_axis(values, order, axis=1)
    drawn = tally[order.T]  # (T, rows, resamples): position i of every row's sorted order
    cols, m = tally.shape[1], ndraws // 2
    if width > _WIDE:  # many rounds: one running sum, and two gathers instead of a width² table
        running = np.cumsum(drawn, axis=0, dtype=np.int32)
        base = (np.arange(rows, dtype=np.intp) * width)[:, None]
        hi = (running <= m).sum(axis=0, dtype=np.intp)
        if ndraws % 2:
            return ranked.ravel().take(hi + base)
        lo = (running <= m - 1).sum(axis=0, dtype=np.intp)
        return (ranked.ravel().take(lo + base) + ranked.ravel().take(hi + base)) / 2
    running = np.zeros((rows, cols), dtype=tally.dtype)
    lo = np.zeros((rows, cols), dtype=tally.dtype)  # positions whose running tally is <= m - 1
    hi = np.zeros((rows, cols), dtype=tally.dtype)  # ... <= m
    hit = np.empty((rows, cols), dtype=np.bool_)
    hit_n = hit.view(np.uint8) if tally.dtype == np.uint8 else hit
    for i in range(width - 1):  # the last running tally is ndraws, never <= m
        np.add(running, drawn[i], out=running)
        np.less_equal(running, m, out=hit)
        np.add(hi, hit_n, out=hi)
        if ndraws % 2 == 0:
            np.less_equal(running, m - 1, out=hit)
            np.add(lo, hit_n, out=lo)
    if ndraws % 2:
        return ranked.ravel().take(hi + (np.arange(rows, dtype=np.intp) * width)[:, None])
    # every (a + b) / 2 a resample can pick, then one gather: cheaper than gathering a and b
    mid = (ranked[:, :, None] + ranked[:, None, :]) / 2
    base = (np.arange(rows, dtype=np.intp) * width * width)[:, None]
    if width * width <= 256 and lo.dtype == np.uint8:  # lo * width + hi fits the narrow lanes: one wide pass, not four
        np.multiply(lo, width, out=lo)
        np.add(lo, hi, out=lo)
        return mid.ravel().take(np.add(lo, base, dtype=np.intp))
    return mid.ravel().take(lo.astype(np.intp) * width + hi + base)


@lru_cache(maxsize=8)
def _percentile_plan(n: int) -> tuple:
    """Where numpy's 'linear' rule finds the 2.5th and 97.5th percentiles of n values."""
    virtual = (n - 1) * (np.array([2.5, 97.5]) / 100)
    prev = np.clip(np.floor(virtual).astype(np.intp), 0, n - 1)
    nxt = np.clip(prev + 1, 0, n - 1)
    return tuple(prev.tolist()), tuple(nxt.tolist()), tuple((virtual - prev).tolist())


def _ci95(stats: np.ndarray) -> list[tuple[float, float]]:
    """Each row's (2.5th, 97.5th) percentile, equal to ``np.percentile`` bit for bit: the same
    positions and the same interpolation arithmetic, applied to all rows at once."""
    prev, nxt, gamma = _percentile_plan(stats.shape[1])
    kth = sorted(set(prev + nxt))
    if stats.dtype == np.float64 and stats.flags.c_contiguous and not np.signbit(stats).any():
        # Non-negative floats (every metric of positive times) are ordered as their bit patterns
        # are, so the same values land at the same places in an integer partition, which skips the
        # float comparison's NaN handling: 2.2 -> 1.5 ms for 87 rows of 2,000 here. A row holding a
        # NaN is reported as NaN below whatever lands where.
        part = np.partition(stats.view(np.int64), kth, axis=1).view(np.float64)
    else:
        part = np.partition(stats, kth, axis=1)
    bounds = []
    for i, j, t in zip(prev, nxt, gamma):
        a, b = part[:, i], part[:, j]
        diff = b - a
        bounds.append(b - diff * (1 - t) if t >= 0.5 else a + diff * t)
    nan = np.isnan(stats).any(axis=1)
    return [(math.nan, math.nan) if bad else (low, high)
            for bad, low, high in zip(nan.tolist(), bounds[0].tolist(), bounds[1].tolist())]


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
