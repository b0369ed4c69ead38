"""The reader's trail: the chain claim -> source -> every record -> what the list shows now, and why.

`show ID` prints the claim itself and then `show_provenance`; `show --record PATH` prints
`show_record`. Both only read files, so a reader can trace any published number without a GPU.
Every string from a claim or a record is made safe for a terminal.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from claimbench.spec.safetext import terminal as _t


def _ci(lo, hi) -> str:
    return f"[{lo:.4g}, {hi:.4g}]" if lo is not None and hi is not None else ""


def show_provenance(root: Path, claim_id: str, *, results_dir: Optional[Path] = None,
                    list_path: Optional[Path] = None, allow_dirty: bool = False) -> str:
    """The chain for one claim, as text; records newest first, each with why it counts or not.
    Every string from the claim or a record is made safe for a terminal."""
    from claimbench.report.publish import plan, shown_path
    from claimbench.report.standing import VERIFIED, Hashes, is_dirty, not_current
    from claimbench.spec.yamlsafe import YamlRejected, load_document
    from claimbench.store.index import read_index
    from claimbench.store.record import sha256_file

    root = Path(root)
    results_dir = Path(results_dir) if results_dir else root / "results"
    list_path = Path(list_path) if list_path else root / "LIST.md"
    claim_file = root / "claims" / f"{claim_id}.yaml"
    out = [f"provenance of {_t(claim_id)}"]
    try:
        data = load_document(claim_file).data
        src = data.get("source") or {}
        out.append(f"  claim    {_t(str(claim_file.relative_to(root)))} (sha256 {sha256_file(claim_file)[:12]}), "
                   f"entry {_t(repr(data.get('entry')))}")
        out.append(_t(f"  source   {src.get('kind')}: {src.get('title')} <{src.get('url')}> at {src.get('locator')}"))
    except (YamlRejected, OSError, AttributeError) as e:
        out.append(f"  claim    {_t(str(claim_file.relative_to(root)))}: cannot read ({_t(str(e))})")
    p = plan(root, list_path, results_dir, allow_dirty=allow_dirty) if list_path.is_file() else None
    refused: dict = {}
    for path, key, msg in (p.refused if p else ()):
        refused.setdefault(path, []).append(f"{key}: {msg}")
    index = read_index(results_dir)
    mine = sorted((s for s in index.summaries if s.claim_id == claim_id), key=lambda s: (s.when, s.path), reverse=True)
    hashes = Hashes(root)
    at = shown_path(results_dir, root)
    out.append(f"  records  {len(mine)} in {_t(at)}")
    for s in mine:
        if not s.ok:
            out.append(f"    UNREADABLE {_t(s.path)}: {_t(s.error or '')}")
            continue
        why = not_current(s, hashes, allow_dirty)
        state = ("REFUSED: " + "; ".join(refused[s.path]) if s.path in refused
                 else "current" if not why else "not current: " + "; ".join(why))
        value = f"{s.value:.4g} {_ci(s.ci_low, s.ci_high)}" if s.value is not None else "-"
        out.append(_t(f"    {s.created_utc[:19]}Z  {s.machine or s.hardware:<16} {s.verdict:<12} {s.metric} {value}  "
                      f"commit {(s.git_commit or '?')[:10]}{' dirty' if is_dirty(s) else ''}  [{s.mode}"
                      + (f", sweep point {s.sweep_axis}={s.sweep_value!r}: never shown]" if s.point else "]")))
        out.append(_t(f"      {at}/{s.path}  ({state})"))
    if p is None:
        out.append(f"  list     {_t(str(list_path))} does not exist")
        return "\n".join(out)
    shown = [n for n in p.numbers if n.claim_id == claim_id]
    out.append(f"  list     {_t(list_path.name)}")
    for n in shown:
        out.append(_t(f"    shows on {n.entry_key!r} (line {n.entry_line}): {' · '.join(n.parts)}"))
        out.append(_t(f"      because {at}/{n.record} is the latest current record for {n.machine}, and it is verified"))
        out.append(_t(f"      reproduce it: claimbench reproduce {at}/{n.record}"))
    for n in (n for n in p.hidden if n.claim_id == claim_id):
        out.append(_t(f"    not shown on {n.entry_key!r}: over the per-entry limit ({at}/{n.record})"))
    for r in (r for r in p.removed if r.claim_id == claim_id):
        out.append(_t(f"    off for {r.machine or r.hardware}: {r.why}"))
    if not shown and not any(r.claim_id == claim_id for r in p.removed):
        has_verified = any(s.ok and s.verdict == VERIFIED for s in mine)
        out.append("    shows nothing: " + ("its verified records are not measured runs" if has_verified
                                            else "no verified record"))
    return "\n".join(out)


def _side(name: str, t) -> list[str]:
    import numpy as np

    x = np.asarray(t.samples_us, dtype=float)
    if not x.size:
        return [f"  {name:<9} no samples"]
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    rounds = len(set(t.rounds)) if t.rounds else 0
    procs = len(set(t.processes)) if t.processes else 1
    return [f"  {name:<9} {x.size} samples kept, {len(t.dropped_us)} dropped for throttling; "
            f"{rounds} rounds in {procs} process(es)",
            f"            median {med:.4g} us  IQR {q3 - q1:.3g} us  min {x.min():.4g}  max {x.max():.4g}  "
            f"cv {x.std() / x.mean() * 100:.2f}%"]


@dataclass(frozen=True)
class TrialRow:
    """One correctness trial as a record holds it, for `show --record` and the site alike. A record is
    someone else's file and `correctness` a free-form block that no verdict depends on: whatever shape
    it has, it is shown for what it is, never read as the runner's (a float for `trials` stopped both)."""

    number: int
    seed: str
    passed: bool
    reason: str
    outputs: tuple[tuple[tuple[str, str], ...], ...]  # per output: (field, value as shown)


def trial_rows(correctness: dict) -> list[TrialRow]:
    trials = correctness.get("trials")
    rows = []
    for i, t in enumerate(trials if isinstance(trials, list) else []):
        if not isinstance(t, dict):
            rows.append(TrialRow(i + 1, "", False, f"not a trial: {_cut(repr(t), 60)}", ()))
            continue
        outs = t.get("outputs")
        shown = tuple(tuple((str(k), f"{v:.3g}" if isinstance(v, float) else _cut(str(v), 60)) for k, v in o.items())
                      for o in (outs if isinstance(outs, list) else []) if isinstance(o, dict))
        rows.append(TrialRow(i + 1, _cut(str(t.get("seed", "")), 30), t.get("passed") is True,
                             _cut(str(t.get("reason", "")), 200), shown))
    return rows


def _trials(correctness: dict) -> list[str]:
    """Per-trial errors, whatever per-output fields the runner recorded."""
    out = []
    for t in trial_rows(correctness):
        head = f"    trial {t.number}" + (f" seed {t.seed}" if t.seed else "")
        out.append(head + ": " + ("passed" if t.passed else f"FAILED {t.reason}".rstrip()))
        for j, o in enumerate(t.outputs):
            out.append(f"      output {j}: " + ", ".join(f"{k} {v}" for k, v in o if k not in ("passed", "reason")))
    return out


def show_record(path: Path) -> str:
    """One record, readable: who ran what where with which software, the verdict, the samples and
    the per-trial errors. Only a regular file under the record size cap is read."""
    from claimbench.spec.display import machine_name
    from claimbench.store.recipe import recipe
    from claimbench.store.record import load_record
    from claimbench.store.summary import hardware_name, hardware_slug

    r = load_record(Path(path))
    hw = r.hardware
    c = r.correctness
    sw = got if isinstance(got := hw.get("software"), dict) else {}
    cpu = got if isinstance(got := hw.get("cpu"), dict) else {}
    out = [f"record {path}",
           f"  claim      {r.claim_id} ({r.claim_path}, sha256 {r.claim_sha256[:12]}); "
           f"schema {r.schema_version}, protocol {r.protocol_version}, harness {r.harness_version}",
           f"  when       {r.created_utc}, commit {r.git_commit or '?'}{' (dirty tree)' if r.git_dirty else ''}",
           f"  hardware   {hardware_name(hw)} ({hardware_slug(hw)}); mode {r.mode}"
           + ("" if r.hardware_match else f"; no match: {r.hardware_reason}"),
           f"  machine    {machine_name(hw, r.protocol)}; cpu {cpu.get('model', '?')}: {cpu.get('cores', '?')} cores, "
           f"{r.protocol.get('torch_threads') or cpu.get('threads_used', '?')} used by the claim's process",
           "  software   " + (", ".join(f"{k} {v}" for k, v in sw.items()
                                       if v is not None and k not in ("git_commit", "git_dirty", "git_dirty_files")) or "?"),
           f"  verdict    {r.verdict}: {r.reason}"]
    if isinstance(changed := sw.get("git_dirty_files"), list) and changed:
        out.append("  changed    " + ", ".join(_cut(str(f), 60) for f in changed[:10])
                   + (f" and {len(changed) - 10} more" if len(changed) > 10 else ""))
    for g in hw.get("gpus") or []:
        if isinstance(g, dict):
            out.append(f"  gpu        {g.get('index', '?')}: {g.get('name', '?')}, cc {g.get('compute_capability', '?')}, "
                       f"{g.get('sm_count', '?')} SMs, driver {g.get('driver_version', '?')}")
    if r.value is not None:
        pub = f"; published {r.published_value:.4g}" if r.published_value is not None else "; not published"
        out.append(f"  value      {r.claimed.get('metric')} {r.value:.4g} 95% CI {_ci(r.ci_low, r.ci_high)} "
                   f"vs claimed {r.claimed.get('value')} (tolerance {r.claimed.get('tolerance')}){pub}")
    for b in r.blockers:
        out.append(f"  blocker    {b}")
    for j in r.rejections:
        out.append(f"  rejected   {j}")
    if r.outcome:
        out.append(f"  outcome    {r.outcome}: {r.outcome_reason}")
    out += _side("kernel", r.kernel) + _side("baseline", r.baseline)
    if r.protocol:  # one key a line, each cut to a screen: it held about 2,000 characters on one (issue 26)
        out += [f"  {'protocol' if i == 0 else '':<10} {k} {_cut(str(v))}" for i, (k, v) in enumerate(sorted(r.protocol.items()))]
    if r.floor_us:
        out.append(f"  floor      {r.floor_us:.4g} us ({r.floor_term})")
    elif r.value is not None:  # a number no physics check stood behind must say so
        out.append("  floor      none applied: " + (r.floor_term or "the claim declares neither flops nor bytes, "
                                                     "or no ceiling was measured"))
    if r.ceilings:
        out.append("  ceilings   " + _cut(", ".join(f"{k} {v}" for k, v in sorted(r.ceilings.items()))))
    out.append(f"  correctness {'passed' if c.get('passed') else 'FAILED' if c.get('passed') is False else 'unknown'}"
               + (f": {c.get('reason')}" if c.get("reason") else ""))
    out += _trials(c)
    src = sorted(r.source_sha256.items(), key=lambda kv: (kv[0].startswith((".", "/")) or "site-packages" in kv[0], kv[0]))
    more = f", and {len(src) - 8} more" if len(src) > 8 else ""
    out.append(f"  sources    {len(src)} file(s): " + ", ".join(f"{k} {v[:12]}" for k, v in src[:8]) + more)
    out += [f"  reproduce  {line}" for line in recipe(r, str(path)).lines()]
    return "\n".join(_t(line) for line in out)


def _cut(text: str, width: int = 110) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"
