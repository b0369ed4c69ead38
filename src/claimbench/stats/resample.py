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
from typing import Optional, Sequence

import numpy as np

from claimbench.stats.percentile import ci95
from claimbench.stats.rounds import round_medians, round_medians_many  # noqa: F401 (re-exported)
from claimbench.stats.samples import MAX_PROCESSES, MIN_ROUNDS, Request, Samples, median, median_of_sorted, metric_value  # noqa: F401 (re-exported)

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


Hints = Optional[Sequence[tuple[Optional[float], Optional[float]]]]


def bootstrap_many(requests: Sequence[Request], resamples: int = RESAMPLES,
                   hints: Hints = None) -> list[tuple[float, float, float]]:
    """(value, low, high) for each request; requests of one shape are computed together.

    ``hints``: each request's expected (low, high), such as the interval its record states; they
    only tell `percentile.ci95` where to look, and the numbers never depend on them."""
    out: list = [None] * len(requests)
    sides = [s for rq in requests for s in ((rq.kernel, rq.baseline) if rq.metric == "speedup" else (rq.kernel,))]
    per_side = round_medians_many(sides)
    first: list[int] = []  # each request's first side in per_side
    at = 0
    for rq in requests:
        first.append(at)
        at += 2 if rq.metric == "speedup" else 1
    said = hints if hints is not None else [(None, None)] * len(requests)
    wanted = np.array([[math.nan if b is None else b for b in h] for h in said], dtype=np.float64).reshape(len(requests), 2)
    with np.errstate(divide="ignore", invalid="ignore"):  # a zero median: inf or NaN, never a warning or a raise
        return _both_paths(requests, per_side, first, resamples=resamples, wanted=wanted, out=out)


def _both_paths(requests: Sequence[Request], per_side: list, first: list[int], *, resamples: int,
                wanted: np.ndarray, out: list) -> list[tuple[float, float, float]]:
    """`_alike` for the usual records, then the general path for the rest."""
    rest = _alike(requests, per_side, first, resamples=resamples, wanted=wanted, out=out)
    groups: dict[tuple, list] = {}
    for i in rest:
        rq = requests[i]
        paired = rq.metric == "speedup"
        kkeys, kvals = per_side[first[i]]
        keys = kkeys
        bvals = None
        if paired:
            bkeys, bvals = per_side[first[i] + 1]
            # both int64 slices of one array: equal bytes are equal keys (0.1 us; array_equal 1.7 us)
            if kkeys.tobytes() != bkeys.tobytes():  # a round one side lacks is dropped from both
                keys = np.intersect1d(kkeys, bkeys, assume_unique=True)
                kvals, bvals = kvals[np.searchsorted(kkeys, keys)], bvals[np.searchsorted(bkeys, keys)]
        kmed = median_of_sorted(sorted(kvals.tolist())) if len(keys) else math.nan
        bmed = median_of_sorted(sorted(bvals.tolist())) if bvals is not None and len(keys) else math.nan
        with np.errstate(divide="ignore", invalid="ignore"):  # a zero median gives inf, as the array path does
            value = float(metric_value(rq.metric, np.float64(kmed), np.float64(bmed), flops=rq.flops,
                                       nbytes=rq.nbytes, floor_us=rq.floor_us))
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
                out[i] = (out[i][0], *ci95(np.asarray(stat)[None, :], wanted[i:i + 1])[0])
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
            for (i, _, _), (low, high) in zip(batch, ci95(table, wanted[[i for i, _, _ in batch]])):
                out[i] = (out[i][0], low, high)
    return out


def _alike(requests: Sequence[Request], per_side: list, first: list[int], *, resamples: int,
           wanted: np.ndarray, out: list) -> list[int]:
    """Fill ``out`` for each request whose sides have the same rounds, at least MIN_ROUNDS and no
    NaN among their medians: the runner's usual record, and nearly all that `audit` reads. Those of
    one shape (processes, rounds in each) are computed as arrays whatever their metric, the values included,
    which saves the general path's Python for each request; the numbers are the general path's,
    bit for bit (`tests/stats/test_resample.py`). Returns the others."""
    rest: list[int] = []
    by_shape: dict[tuple, list[int]] = {}
    for i, rq in enumerate(requests):
        kkeys = per_side[first[i]][0]
        n = len(kkeys)
        if n < MIN_ROUNDS or n * resamples * 4 > _TALLY_CACHE_BYTES \
                or (rq.metric == "speedup" and kkeys.tobytes() != per_side[first[i] + 1][0].tobytes()):
            rest.append(i)
            continue
        if int(kkeys[-1]) >> 32 == 0:  # one process, the usual case on a GPU (keys are sorted)
            shape: tuple = (1, (n,))
        else:  # several (--repeat), the usual case on a CPU
            _, counts = np.unique(kkeys >> 32, return_counts=True)
            shape = (len(counts), tuple(counts.tolist()))
        by_shape.setdefault(shape, []).append(i)
    for (nprocs, counts), members in by_shape.items():
        width = sum(counts)
        rows, krow, brow, members = _stacked(requests, per_side, first, members=members, width=width, rest=rest)
        if not members:
            continue
        ranked = np.sort(rows, axis=1)
        m = width // 2
        med = ranked[:, m] if width % 2 else (ranked[:, m - 1] + ranked[:, m]) / 2  # as median_of_sorted
        values = _metric_table(requests, members, km=med[krow], bm=med[brow]).tolist()
        tally, ndraws = _draw_tally(nprocs, counts, resamples)
        per_batch = max(1, _BATCH_BYTES // (2 * tally.size * tally.itemsize))
        for start in range(0, len(members), per_batch):
            stop = min(start + per_batch, len(members))
            lo, hi = int(krow[start]), int(brow[stop - 1]) + 1
            medians = _resampled_medians(rows[lo:hi], tally, ndraws)
            batch = members[start:stop]
            if len(batch) * 2 == len(medians):  # all speedups: views, not gathers
                km, bm = medians[0::2], medians[1::2]
            else:
                km, bm = medians[krow[start:stop] - lo], medians[brow[start:stop] - lo]
            table = _metric_table(requests, batch, km=km, bm=bm)
            for i, value, (low, high) in zip(batch, values[start:stop], ci95(table, wanted[batch])):
                out[i] = (value, low, high)
    return sorted(rest)


def _stacked(requests, per_side, first, *, members, width, rest):
    """(rows, kernel row, baseline row, members) of the members with no NaN round median; a
    baseline row is the kernel's where the metric reads one side. The others go to ``rest``
    (sorted() and np.sort place a NaN differently: the general path decides those)."""
    two = np.array([requests[i].metric == "speedup" for i in members])
    krow = np.concatenate(([0], np.cumsum(1 + two)[:-1]))
    rows = np.empty((int(krow[-1]) + 1 + int(two[-1]), width))
    rows[krow] = [per_side[first[i]][1] for i in members]
    if two.any():
        rows[krow[two] + 1] = [per_side[first[i] + 1][1] for i, t in zip(members, two.tolist()) if t]
    brow = krow + two
    nan = np.isnan(rows).any(axis=1)
    bad = nan[krow] | nan[brow]
    if not bad.any():
        return rows, krow, brow, members
    rest.extend(i for i, b in zip(members, bad.tolist()) if b)
    keep = [i for i, b in zip(members, bad.tolist()) if not b]
    if not keep:
        return rows, krow, brow, keep
    return _stacked(requests, per_side, first, members=keep, width=width, rest=rest)


def _metric_table(requests: Sequence[Request], members: list[int], *, km: np.ndarray, bm: np.ndarray) -> np.ndarray:
    """`metric_value` of each member's kernel (``km``) and baseline (``bm``) medians, rows or
    scalars, with the same operations in the same order, so the same numbers."""
    metrics = [requests[i].metric for i in members]
    if metrics.count("speedup") == len(metrics):
        return bm / km
    out = np.empty(km.shape)
    for metric in set(metrics):
        sel = np.array([m == metric for m in metrics])
        k = km[sel]
        shape = (len(k),) + (1,) * (k.ndim - 1)
        if metric == "speedup":
            out[sel] = bm[sel] / k
        elif metric == "time_us":
            out[sel] = k
        else:
            attr, scale = {"tflops": ("flops", 1e6), "gbps": ("nbytes", 1e3), "sol_fraction": ("floor_us", None)}[metric]
            work = np.array([getattr(requests[i], attr) or 0.0 for i, s in zip(members, sel.tolist()) if s]).reshape(shape)
            out[sel] = work / k / scale if scale is not None else work / k
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


def _drawable(nprocs: int, counts: tuple) -> None:
    """Refuse a shape whose resamples would cost far more than its observations: each resample
    draws ``max(counts)`` rounds from each of ``nprocs`` processes, so one process of 1,500 rounds
    beside 1,499 of one round each (3,000 samples a side, a 170 KB record) drew 2.25 million rounds
    a resample, and one audit of it took 33 s (an adversarial review; 50,000 of each asked for 18.6
    GiB). Processes of a run differ by the rounds a throttled or shortened process lost, far from
    this bound."""
    total, ndraws = sum(counts), nprocs * max(counts)
    if nprocs > MAX_PROCESSES:
        raise ValueError(f"{nprocs} processes: more than the {MAX_PROCESSES} a run can have (--repeat)")
    if ndraws > 2 * total + 1024:
        raise ValueError(f"processes of {min(counts)} to {max(counts)} rounds: a resample would draw {ndraws} rounds "
                         f"from {total}, a layout no run writes (its processes have alike numbers of rounds)")


def _tally_slices(nprocs: int, counts: tuple, resamples: int):
    """The tally in slices of resamples, drawn from one random stream in the order a single
    draw would take: the same numbers, in memory linear in the rounds with a small constant."""
    _drawable(nprocs, counts)
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
