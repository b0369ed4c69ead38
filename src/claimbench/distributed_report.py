"""What rank 0 reports for a multi-rank claim: every rank's correctness merged, and the topology.

A trial passes only if it passed on every rank, and a failure names the rank. The topology is
what a reader needs to compare a collective's number: world size, backend, NCCL version, the GPUs,
and whether they talk over NVLink or PCIe (NVML's P2P status between every pair).
"""

from __future__ import annotations

from itertools import zip_longest
from typing import Any


def merge_correctness(per_rank: list[dict], device: str, dtype: str) -> dict:
    """One correctness block from every rank's: a trial passes only if it passed on all ranks."""
    trials = []
    for rows in zip_longest(*[c.get("trials", []) for c in per_rank]):
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
    rejections = tagged([c.get("rejections", []) for c in per_rank])
    passed: Any = None if rejections else all(c.get("passed") is True for c in per_rank)
    if passed:
        reason = f"{len(trials)} checks passed on each of {len(per_rank)} ranks ({device}, {dtype})"
    else:
        k = next((k for k, c in enumerate(per_rank) if c.get("passed") is not True), 0)
        reason = f"rank {k}: {per_rank[k].get('reason', '')}"
    return {"passed": passed, "reason": reason, "trials": trials, "rejections": rejections}


def tagged(lists: list[list[str]]) -> list[str]:
    """Problems found on every rank once; the others with the ranks that found them."""
    seen: dict[str, list[int]] = {}
    for k, xs in enumerate(lists):
        for x in xs:
            seen.setdefault(x, []).append(k)
    n = len(lists)
    return [x if len(ks) == n else f"rank {','.join(map(str, ks))}: {x}" for x, ks in seen.items()]


def nvml_for(props) -> dict:
    """This rank's NVML handle index, matched by UUID (NVML ignores CUDA_VISIBLE_DEVICES)."""
    try:
        from .detect import Nvml
        nv = Nvml.open()
        want = str(getattr(props, "uuid", "")).lower().removeprefix("gpu-")
        for i in range(nv.count() if nv else 0):
            u = str(nv.device_info(i).get("uuid") or "").lower().removeprefix("gpu-")
            if want and u == want:
                return {"nvml": nv, "nvml_index": i}
    except Exception:
        pass
    return {}


def topology(rank) -> dict:
    """World size, backend, NCCL version, and whether the GPUs talk over NVLink or PCIe."""
    torch = rank.torch
    topo: dict[str, Any] = {"world_size": rank.world, "backend": rank.backend, "nccl_version": None,
                            "interconnect": "none", "gpus": []}
    if rank.device != "cuda":
        return topo
    props = torch.cuda.get_device_properties(rank.local)
    mine = {"name": props.name, "uuid": str(getattr(props, "uuid", ""))}
    topo["gpus"] = rank.gather(mine)
    try:
        v = torch.cuda.nccl.version()
        topo["nccl_version"] = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
    except Exception:
        pass
    topo["interconnect"] = _interconnect([g["uuid"] for g in topo["gpus"]])
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
    except Exception:
        return "unknown"
