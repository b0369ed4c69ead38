"""`python -m claimbench.ci.plan`: which GPU runner labels have claims to verify in this change.

A workflow's matrix lists every GPU model, but `--hardware-only` makes a runner with nothing to
verify fail (on purpose). So a cheap CPU job plans first: for each runner label it builds the
machine the label promises (GPU name and count) and keeps the label if a selected claim matches
it, by the same `hardware.matches` the runner uses. The GPU job still checks the real machine.

    python -m claimbench.ci.plan --runners '{"h100": {"gpu": "NVIDIA H100 80GB HBM3", "count": 8}}' \
        [--changed-since origin/main] [PATHS...]

prints a JSON list of labels, and exits 1 when it is empty or a claim does not parse: a GPU run a
maintainer asked for, with nothing to verify, has failed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Iterable, Optional

from claimbench.errors import UserError
from claimbench.machine.hardware import CpuInfo, GpuInfo, Hardware, Software, matches


def runner_hardware(desc: dict) -> Hardware:
    """The machine a runner label promises: `gpu` (name), `count`, optional `compute_capability`, `sm_count`."""
    name = desc.get("gpu")
    if not isinstance(name, str) or not name:
        raise UserError(f"runner description {desc!r}: needs a `gpu` name, e.g. \"NVIDIA H200\"")
    gpu = GpuInfo(index=0, name=name, uuid=None, compute_capability=desc.get("compute_capability"),
                  sm_count=desc.get("sm_count"), l2_bytes=None, memory_bytes=None, driver_version=None,
                  cuda_version=None, sm_clock_mhz=None, mem_clock_mhz=None, max_sm_clock_mhz=None,
                  throttle_reasons=None, temperature_c=None, power_w=None, power_limit_w=None,
                  mig_enabled=False, ecc_enabled=None)
    count = int(desc.get("count", 1))
    gpus = tuple(GpuInfo(**{**gpu.__dict__, "index": i}) for i in range(count))
    return Hardware("cuda", gpus, CpuInfo("runner", 1, 1, None, None),
                    Software("", None, None, None, None, None, None, None))


def plan(paths: Iterable[Path], root: Path, runners: dict[str, dict], *, changed_since: Optional[str] = None) -> list[str]:
    """Labels (in the given order) with at least one selected CUDA claim their machine matches."""
    from claimbench.spec.claim import Claim
    from claimbench.spec.yamlsafe import load_document

    paths = list(paths)
    if changed_since:
        from claimbench.ci.changed import changed_claims
        paths = changed_claims(root, paths, changed_since)
    claims = []
    for p in paths:
        try:
            claims.append(Claim.model_validate(load_document(p).data))
        except Exception:
            raise UserError(f"{p}: does not parse as a claim; run `claimbench check` and fix it first") from None
    machines = {label: runner_hardware(desc) for label, desc in runners.items()}
    return [label for label, hw in machines.items()
            if any(c.hardware.device == "cuda" and matches(c.hardware, hw)[0] for c in claims)]


def main(argv: Optional[list[str]] = None) -> int:
    from claimbench.gate.claimfiles import discover
    from claimbench.spec.project import find_root

    ap = argparse.ArgumentParser(prog="python -m claimbench.ci.plan", description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="*", help="claim files or folders (default: claims/)")
    ap.add_argument("--runners", required=True, help="JSON: {label: {gpu, count, compute_capability?, sm_count?}}")
    ap.add_argument("--changed-since", default=None, metavar="REF")
    ap.add_argument("--root", default=None)
    args = ap.parse_args(argv)
    try:
        runners = json.loads(args.runners)
        if not isinstance(runners, dict) or not runners:
            raise ValueError("expected a non-empty JSON object")
        root = find_root(args.root, args.paths)
        labels = plan(discover(args.paths, root), root, runners, changed_since=args.changed_since or None)
    except (UserError, ValueError) as e:
        print(f"claimbench.ci.plan: {e}", file=sys.stderr)
        return getattr(e, "exit_code", 2)
    if not labels:
        print("claimbench.ci.plan: no selected claim needs any of these GPU runners "
              f"({', '.join(runners)}); nothing to verify is a failed GPU run", file=sys.stderr)
        return 1
    print(json.dumps(labels))
    return 0


if __name__ == "__main__":
    sys.exit(main())
