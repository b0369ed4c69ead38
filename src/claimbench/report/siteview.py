"""What the site's templates show, computed from records and claims: plain values, no HTML.

A published number reads `value [95% CI]`, the kernel against the baseline, the machine told
apart from others of its kind (a GPU's model and count, a CPU's model and the cores the run
used) and the precision. The claim page's reproduce steps come from `store.recipe`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Optional

from claimbench.report.siteplots import number
from claimbench.spec.display import dtype_short, format_value
from claimbench.store.recipe import recipe
from claimbench.store.summary import Summary

VERIFIED = "verified"


@dataclass(frozen=True)
class NumberView:
    claim_id: str
    entry_key: str
    entry_line: int
    value: str
    interval: str
    kernel: str
    versus: str  # the baseline, for a speedup
    machine: str
    dtype: str
    dirty: bool
    record: str  # relative to the results folder


def interval(metric: str, value: Optional[float], lo: Optional[float], *, hi: Optional[float]) -> str:
    """The 95% CI in the units the value is shown in."""
    if lo is None or hi is None:
        return ""
    if metric == "speedup":
        return f"[{lo:.2f}, {hi:.2f}]"
    if metric == "sol_fraction":
        return f"[{lo * 100:.0f}%, {hi * 100:.0f}%]"
    scale = 1000.0 if metric == "gbps" and (value or 0) >= 1000 else 1.0
    return f"[{number(lo / scale)}, {number(hi / scale)}]"


def machine(hw: dict) -> str:
    """Two machines of one kind told apart: GPU model and count, or CPU model and cores used."""
    gpus = [g for g in hw.get("gpus") or [] if isinstance(g, dict)]
    if hw.get("device") == "cuda" and gpus:
        name = re.sub(r"^NVIDIA\s+", "", str(gpus[0].get("name") or hw.get("name") or "GPU"))
        return f"{len(gpus)} x {name}" if len(gpus) > 1 else name
    cpu = got if isinstance(got := hw.get("cpu"), dict) else {}
    model = str(cpu.get("model") or hw.get("name") or "CPU")
    used = cpu.get("threads_used") or cpu.get("cores")
    return f"{model} ({used} cores)" if used else model


def number_view(n, s: Optional[Summary], rec, *, claim) -> NumberView:
    metric = s.metric if s else ""
    shown = s.published_value if s and s.published_value is not None else (s.value if s else 0.0)
    assert shown is not None  # numbers are published from verified records, which have a value
    value = float(shown)
    return NumberView(
        n.claim_id, n.entry_key, n.entry_line,
        format_value(metric, value, s.floor_term if s else ""),
        interval(metric, value, s.ci_low if s else None, hi=s.ci_high if s else None),
        claim.kernel.name if claim else "", claim.baseline.name if claim and metric == "speedup" else "",
        machine(rec.hardware) if rec is not None else (s.hardware_name if s else n.hardware),
        dtype_short(s.dtype) if s else "", n.dirty, n.record)


def _when(s: Summary) -> datetime:
    return datetime.fromisoformat(s.created_utc.replace("Z", "+00:00"))


def claim_view(cid: str, checked, recs: list[Summary], *, numbers: list[NumberView], removed: list,
               record: Callable, links, page_dir: Path, results_dir: Path) -> dict:
    from claimbench.report import siteplots

    c = checked.claim if checked is not None else None
    # the claim's own params only: a sweep's other points have their own figure, never the claim's history
    measured = [s for s in recs if s.ok and s.mode == "measured" and s.value is not None and s.point is None]
    latest: dict[str, Summary] = {}
    for s in measured:
        latest.setdefault(s.hardware, s)  # recs are newest first
    view: dict[str, Any] = {"cid": cid, "claim": c, "ok": checked is not None and checked.ok,
            "problems": [str(p) for p in (checked.problems if checked is not None else [])],
            "numbers": [(n, links.record(n.record, 1)) for n in numbers],
            "removed": removed, "history": None, "samples": None, "trials": [], "reproduce": [], "sweep": None,
            "steps": []}
    if c is not None:
        view["fields"] = [("entry", c.entry)] + [
            (k, "; ".join(f"{f}: {v}" for f, v in getattr(c, k).model_dump(exclude_none=True).items() if v not in ([], {})))
            for k in ("hardware", "workload", "precision", "kernel", "baseline", "correctness", "claimed")]
    else:
        view["fields"] = []
    for s in list(latest.values())[:4]:
        rec = record(s.path)
        if rec is not None:
            view["reproduce"].append((machine(rec.hardware), recipe(rec, f"results/{s.path}").lines()))
    if measured:
        series: dict[str, list] = {}
        for s in sorted(measured, key=lambda s: s.created_utc):
            lo = s.ci_low if s.ci_low is not None else s.value
            hi = s.ci_high if s.ci_high is not None else s.value
            series.setdefault(s.hardware_name or s.hardware, []).append((_when(s), s.value, lo, hi, s.verdict == VERIFIED))
        from claimbench.report.steps import steps
        view["steps"] = found = steps(measured)
        marks = [(_when(st.after), st.label, st.better) for st in found if st.marked]
        siteplots.save(siteplots.history(series, c.claimed.value if c else None, c.claimed.metric if c else "value",
                                         marks=marks), page_dir / f"{cid}-history.svg")
        view["history"] = f"{cid}-history.svg"
        full = [(s, record(s.path)) for s in list(latest.values())[:4]]
        full = [(s, r) for s, r in full if r is not None and r.kernel.samples_us]
        if full:
            panels = [(f"{machine(r.hardware)} {r.created_utc[:10]}", r.kernel.samples_us, r.kernel.median_us,
                       r.baseline.samples_us, r.baseline.median_us) for _, r in full]
            siteplots.save(siteplots.samples(panels), page_dir / f"{cid}-samples.svg")
            view["samples"] = f"{cid}-samples.svg"
            view["trials"] = [(machine(r.hardware), _trials(r)) for _, r in full]
    if c is not None and c.workload.sweep:
        from claimbench.report.sitesweep import save_sweep, sweep_series
        view["sweep_axis"] = next(iter(c.workload.sweep))
        view["sweep"] = save_sweep(c, sweep_series(c, recs, record, machine=machine), page_dir / f"{cid}-sweep.svg")
    view["records"] = [dict(created=s.created_utc[:19], machine=s.hardware_name or s.hardware,
                            point=f"{s.sweep_axis}={s.sweep_value}" if s.point else "claim's own",
                            verdict=s.verdict or "unreadable", verified=s.verdict == VERIFIED,
                            value="" if s.value is None else f"{s.value:.4g}",
                            ci=interval("", s.value, s.ci_low, hi=s.ci_high),
                            commit=(s.git_commit or "")[:10] + (" dirty" if s.git_dirty else ""),
                            href=links.record(s.path, 1)) for s in recs]
    return view


def _trials(r) -> list[tuple[str, str, bool, str, str]]:
    from claimbench.report.trail import trial_rows

    return [(str(t.number), t.seed, t.passed, "passed" if t.passed else f"FAILED {t.reason}",
             "; ".join(", ".join(f"{k} {v}" for k, v in o if k not in ("passed", "reason", "shape")) for o in t.outputs))
            for t in trial_rows(r.correctness)]


def roofline_sections(measured: list[Summary], record: Callable, out: Path, *, claims: dict) -> list[dict]:
    """Per machine: the ceilings, the claims placed, those only on the bandwidth chart, and why."""
    from claimbench.report import siteplots

    sections = []
    for hw in sorted({s.hardware for s in measured}):
        latest: dict[str, Summary] = {}
        for s in sorted((s for s in measured if s.hardware == hw), key=lambda s: (s.created_utc, s.path), reverse=True):
            latest.setdefault(s.claim_id, s)
        points, bars, why_not, name = [], [], [], hw
        ceilings: dict = {}
        for cid, s in sorted(latest.items()):
            r = record(s.path)
            if r is None:
                why_not.append((cid, "its record cannot be read"))
                continue
            ceilings = ceilings or r.ceilings
            name = machine(r.hardware)
            k, b = r.kernel.median_us, r.baseline.median_us
            if not k:
                why_not.append((cid, "its record has no kernel time"))
                continue
            if r.bytes:
                bars.append(siteplots.Bar(cid, r.bytes / k / 1e3, r.bytes / b / 1e3 if b else None))
            if r.flops and r.bytes:
                points.append(siteplots.Point(cid, r.flops / r.bytes, r.flops / k / 1e6, r.flops / b / 1e6 if b else None))
            elif r.bytes:
                why_not.append((cid, "declares no workload.flops, so it has no arithmetic intensity; "
                                     "its achieved bandwidth is in the chart below"))
            else:
                why_not.append((cid, "declares neither workload.flops nor workload.bytes"))
        bw = ceilings.get("bandwidth_gbps") if isinstance(ceilings.get("bandwidth_gbps"), (int, float)) else None
        mm = ceilings.get("matrix_tflops")
        rates = {str(k): float(v) for k, v in mm.items() if isinstance(v, (int, float))} if isinstance(mm, dict) else (
            {"matrix": float(mm)} if isinstance(mm, (int, float)) else {})
        slug = _file_slug(hw)
        sec = {"machine": name, "slug": slug, "bandwidth": bw, "rates": sorted(rates.items()),
               "placed": [p.claim for p in points], "why_not": why_not, "roofline": None, "bars": None}
        if points:
            siteplots.save(siteplots.roofline(name, bw, rates, points=points), out / f"roofline-{slug}.svg")
            sec["roofline"] = f"roofline-{slug}.svg"
        if bars:
            siteplots.save(siteplots.bandwidth(f"achieved bandwidth on {name}", bw, bars), out / f"bandwidth-{slug}.svg")
            sec["bars"] = f"bandwidth-{slug}.svg"
        sections.append(sec)
    return sections


def _file_slug(hw: str) -> str:
    """A file name part for a hardware slug, which a record sets: lowercase letters, digits and
    dashes, at most 60 characters; a longer one is cut and keeps a digest of the whole, so two
    machines never share a chart and no name passes the file system's limit (a 300-character
    slug stopped the site)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", hw.lower()).strip("-") or "unknown"
    if len(slug) <= 60 and slug == hw:
        return slug
    # cleaned or cut: a digest of the whole keeps it apart from the slug it now resembles (a record
    # saying `nvidia-h200!` drew over the real H200's charts; an adversarial review, 2026-12-06)
    return slug[:51].strip("-") + "-" + hashlib.sha256(hw.encode("utf-8", "surrogatepass")).hexdigest()[:8]
