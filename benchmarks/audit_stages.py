"""Where a cold `audit` spends its time, per record: each stage of the worker's check timed alone.

A cold audit reads, parses, validates and re-decides every record (`store/recordcheck.py`), on two
worker processes, then judges them all in the parent (`report/standing.py`). This times each stage
of a worker's check on a sample of records, in one process with garbage collection paused as the
workers run it, then the worker's real path (`_verify_chunk`) on the same sample, and prints what
that implies for 100,000 records on two workers. It says which stages bound the audit, so a change
aimed at the cold figure (issue 25: 10 s or less at 100,000 records) starts from measured costs.

    .venv/bin/python benchmarks/publish_scale.py --keep /tmp/scale --sizes ""   # once: the records
    .venv/bin/python benchmarks/audit_stages.py /tmp/scale/n100000 [--sample 3000] [--timeline]
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import random
import time
from pathlib import Path
from typing import Any, Callable

from claimbench.stats.verdict import decide_many
from claimbench.store import recordcheck
from claimbench.store.jsonio import loads_json, no_key_twice, twice_keyed
from claimbench.store.record import _without_samples, parse_record, read_record_bytes
from claimbench.store.summary import read_summary


def per_record_us(fn: Callable[[], Any], n: int, repeat: int = 3) -> tuple[float, Any]:
    """Best of ``repeat`` runs of ``fn`` over the sample, in microseconds per record, and its result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best / n * 1e6, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("project", type=Path, help="a project whose results/records/ holds the records")
    ap.add_argument("--sample", type=int, default=3000, help="records timed (drawn at random, seed 0)")
    ap.add_argument("--timeline", action="store_true",
                    help="also time one cold audit of every record in-process: its records phase, then the whole")
    args = ap.parse_args()
    files = sorted(str(p) for p in (args.project / "results" / "records").rglob("*.json"))
    if not files:
        raise SystemExit(f"no records under {args.project / 'results' / 'records'}")
    random.Random(0).shuffle(files)
    files = files[:args.sample]
    n = len(files)
    gc.disable()  # as the workers run (`index.paused_gc`)
    rows: list[tuple[str, float]] = []

    def stage(name: str, fn: Callable[[], Any]) -> Any:
        us, out = per_record_us(fn, n)
        rows.append((name, us))
        return out

    raws = stage("read (bounded reader)", lambda: [read_record_bytes(p, p)[0] for p in files])
    stage("sha256", lambda: [hashlib.sha256(r).hexdigest() for r in raws])
    datas = stage("JSON parse (orjson)", lambda: [loads_json(r) for r in raws])
    stage("repeated-key check", lambda: [None if no_key_twice(r, _without_samples(d)) else twice_keyed(r, d)
                                          for r, d in zip(raws, datas)])
    recs = stage("schema and sanity (pydantic)", lambda: [parse_record(d, "x") for d in datas])
    whole, _ = per_record_us(lambda: [read_summary(p, p, r, sha="0" * 64, st=None) for p, r in zip(files, raws)], n)
    rows.append(("summary (the rest of read_summary)", whole - sum(us for _, us in rows[2:])))
    evs = stage("evidence", lambda: [r.evidence() for r in recs])
    said = [(r.ci_low, r.ci_high) for r in recs]  # as check_records passes them: where to look first
    stage("verdict, value and CI (bootstrap)", lambda: decide_many(evs, hints=said))
    checked, _ = per_record_us(lambda: recordcheck.check_records(recs), n)
    rows.append(("comparisons (the rest of check_records)", checked - sum(us for name, us in rows if name in (
        "evidence", "verdict, value and CI (bootstrap)"))))
    items = [(f.split("/results/", 1)[1], f) for f in files]
    recordcheck._init(frozenset())
    chunks = [items[i:i + recordcheck._CHUNK] for i in range(0, n, recordcheck._CHUNK)]
    real, _ = per_record_us(lambda: [recordcheck._verify_chunk(c) for c in chunks], n)
    print(f"{n} records from {args.project}, one process, garbage collection paused, best of 3:")
    for name, us in rows:
        print(f"  {name:<42} {us:7.1f} us/record")
    print(f"  {'sum of the stages':<42} {sum(us for _, us in rows):7.1f} us/record")
    print(f"  {'the worker path (_verify_chunk)':<42} {real:7.1f} us/record")
    print(f"at 100,000 records on two workers: {real * 1e5 / 2 / 1e6:.1f} s of wall for the workers alone "
          "(the parent's judgement and the start come on top)")
    if args.timeline:
        timeline(args.project)


def timeline(project: Path) -> None:
    """One cold audit without the cache, as the CLI runs it (collector off), with the moment the
    judgement starts marked: before it, the start, the workers and the collection; from it, the
    serial tail (`audit._audit_list`, wrapped here to read the clock, nothing else)."""
    from claimbench.report import audit

    marks: list[float] = []
    judge = audit._audit_list

    def marked(*a: Any, **k: Any) -> Any:
        marks.append(time.perf_counter())
        try:
            return judge(*a, **k)
        finally:
            marks.append(time.perf_counter())

    audit._audit_list = marked  # type: ignore[assignment]  # instrumentation of this process only
    gc.disable()
    t = time.perf_counter()
    problems, checked = audit.audit_report(project, project / "LIST.md", project / "results", cache=False)
    whole = time.perf_counter() - t
    audit._audit_list = judge  # type: ignore[assignment]
    print(f"one cold audit of {len(checked)} records ({len(problems)} problems), {whole:.2f} s: the judgement "
          f"starts at {marks[0] - t:.2f} s and takes {marks[1] - marks[0]:.2f} s")


if __name__ == "__main__":
    main()
