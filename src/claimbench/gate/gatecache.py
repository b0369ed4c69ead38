"""`check` for the 2,000 claims behind a list, on every publish and audit: in parallel, and cached.

A claim's check result depends only on its file, the files its code is made of, the list's
entries, and claimbench's own checking code. For a claim backed by a current record, the record
holds the sha256 of exactly those source files and they match the disk, so the result is cached
under `results/.cache/` keyed by all four. Anything that changes any of them checks again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Optional, Sequence

from claimbench.spec.problem import Problem
from claimbench.store.cachefile import load_json_cache, save_cache
from claimbench.store.codeprint import code_fingerprint

# Every module whose code can change a claim's check: the cache is keyed by their source
# (tests/store/test_codeprint.py holds it to what these modules import).
_CODE = ("claimbench.gate.policy", "claimbench.gate.gateall", "claimbench.gate.rules", "claimbench.gate.srcgraph",
         "claimbench.gate.facts", "claimbench.gate.gatecache", "claimbench.spec.claim", "claimbench.spec.yamlsafe",
         "claimbench.spec.expr", "claimbench.spec.listing", "claimbench.spec.problem", "claimbench.spec.memory",
         "claimbench.spec.safetext", "claimbench.spec.ops", "claimbench.spec.draft07", "claimbench.spec.bounded",
         "claimbench.stats.precision", "claimbench.stats.resample", "claimbench.stats.percentile",
         "claimbench.stats.rounds", "claimbench.stats.samples", "claimbench.options",
         "claimbench.store.codeprint", "claimbench.store.cachefile", "claimbench.store.jsonio", "claimbench.errors",
         "claimbench.spec.markers", "claimbench.spec.mdscan")


def _fingerprint() -> str:
    return code_fingerprint(_CODE)


def _listing_digest(listing) -> str:
    names = "\n".join(" > ".join(tuple(e.path) + (e.name,)) for e in listing.entries) if listing else ""
    return hashlib.sha256(names.encode()).hexdigest()


def gate_cached(paths: Sequence[str], root: Path, listing, *, sources: Optional[dict] = None,
                 cache_dir: Optional[Path] = None, known: Optional[dict] = None) -> list:
    """CheckResults for claim files (relative to root), in order. `sources` maps a claim path to
    the source hashes of a current record for it; only those claims are cached. `known`: as
    `gateall.gate_all`."""
    from claimbench.gate.gateall import _DUPLICATE, gate_all, unique_ids
    from claimbench.gate.policy import CheckResult
    from claimbench.spec.claim import Claim

    root = Path(root)
    sources = sources or {}
    cfile = Path(cache_dir) / f"check-{_fingerprint()}.json" if cache_dir else None
    cache = load_json_cache(cfile)
    digest = _listing_digest(listing)
    keys, out, todo = {}, {}, []
    for p in paths:
        f = root / p
        if cfile and p in sources and f.is_file():
            h = hashlib.sha256(f.read_bytes()).hexdigest()
            keys[p] = hashlib.sha256(json.dumps([p, h, digest, sorted(sources[p].items())]).encode()).hexdigest()
            hit = cache.get(keys[p])
            if hit is not None:
                claim = Claim.model_validate(hit["claim"]) if hit["claim"] is not None else None
                out[p] = CheckResult(hit["path"], claim, tuple(Problem(*x) for x in hit["problems"]))
                continue
        todo.append(p)
    for p, r in zip(todo, gate_all([root / p for p in todo], root, listing, known=known)):
        out[p] = r
        if p in keys:
            cache[keys[p]] = {"path": r.path, "claim": r.claim.model_dump() if r.claim else None,
                              "problems": [[x.path, x.line, x.key, x.message] for x in r.problems
                                           if not (x.key == "id" and _DUPLICATE in x.message)]}
    results = unique_ids([out[p] for p in paths])
    if cfile and todo and keys:
        save_cache(cfile, {k: cache[k] for k in keys.values() if k in cache}, "check-*.json")
    return results
