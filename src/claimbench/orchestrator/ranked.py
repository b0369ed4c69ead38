"""What the orchestrators of a multi-rank claim report as one: correctness merged, topology.

A trial passes only if it passed on every rank, and a failure names the rank. The topology is what
a reader needs to compare a collective's number: world size, nodes, backend, NCCL version, the GPUs,
and whether they talk over NVLink or PCIe (NVML's P2P status between every pair).
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Any, Sequence

from claimbench.orchestrator.job import Correctness


def merge_correctness(per_rank: Sequence[Correctness], device: str, dtype: str, *, rejections: Sequence[str] = ()) -> Correctness:
    """One correctness block from every rank's: a trial passes only if it passed on all ranks."""
    trials = []
    for rows in zip_longest(*[c.trials for c in per_rank]):
        ok = [r is not None and r.get("passed") for r in rows]
        first = next((k for k, r in enumerate(rows) if r is not None), 0)
        row = {k: v for k, v in rows[first].items() if k in ("seed", "params", "dtype", "property")}
        bad = [k for k, good in enumerate(ok) if not good]
        why = ""
        if bad:
            r = rows[bad[0]]
            why = f"rank {bad[0]}: " + (r.get("reason", "") if r is not None else "did not run this trial")
        row.update(passed=not bad, reason=why,
                   outputs=[{**o, "rank": k} for k, r in enumerate(rows) if r is not None for o in r.get("outputs", [])],
                   ranks=[{"rank": k, "seed": r.get("seed") if r else None, "passed": bool(ok[k]),
                           "reason": (r or {}).get("reason", "did not run")} for k, r in enumerate(rows)])
        trials.append(row)
    passed = None if rejections else all(c.passed is True for c in per_rank)
    if passed:
        reason = f"{len(trials)} checks passed on each of {len(per_rank)} ranks ({device}, {dtype})"
    else:
        k = next((k for k, c in enumerate(per_rank) if c.passed is not True), 0)
        reason = f"rank {k}: {per_rank[k].reason}"
    return Correctness(passed=passed, reason=reason, trials=tuple(trials))


def tagged(lists: list[list[str]]) -> list[str]:
    """Problems found on every rank once; the others with the ranks that found them."""
    seen: dict[str, list[int]] = {}
    for k, xs in enumerate(lists):
        for x in xs:
            seen.setdefault(x, []).append(k)
    n = len(lists)
    return [x if len(ks) == n else f"rank {','.join(map(str, ks))}: {x}" for x, ks in seen.items()]


def topology(world: int, nodes: int, backend: str, *, gpu_uuids: list[str], nccl_version: str | None) -> dict:
    """The record's topology: interconnect "network" across nodes, else NVLink or PCIe as NVML reports it
    ("unknown" without NVML), and "none" when no GPU took part."""
    topo: dict[str, Any] = {"world_size": world, "nodes": nodes, "backend": backend, "nccl_version": nccl_version,
                            "interconnect": "none", "gpus": gpu_uuids}
    if gpu_uuids:
        topo["interconnect"] = "network" if nodes > 1 else _interconnect(gpu_uuids)
    return topo


def _interconnect(uuids: list[str]) -> str:
    """"nvlink" when NVML reports NVLink P2P between every pair of the ranks' GPUs, else "pcie"."""
    try:
        import pynvml as nv
        nv.nvmlInit()
        try:
            hs = [nv.nvmlDeviceGetHandleByUUID(u if u.lower().startswith("gpu-") else f"GPU-{u}") for u in uuids]
            for i in range(len(hs)):
                for j in range(i + 1, len(hs)):
                    st = nv.nvmlDeviceGetP2PStatus(hs[i], hs[j], nv.NVML_P2P_CAPS_INDEX_NVLINK)
                    if st != nv.NVML_P2P_STATUS_OK:
                        return "pcie"
            return "nvlink"
        finally:
            nv.nvmlShutdown()
    except Exception:  # no NVML here: the record says so rather than guessing
        return "unknown"
