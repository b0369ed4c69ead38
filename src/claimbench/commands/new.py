"""`claimbench new ID`: start a claim from a working example (claim, task, kernel, test)."""

from __future__ import annotations

from claimbench.errors import EXIT_OK
from claimbench.spec.project import find_root


def register(sub) -> None:
    p = sub.add_parser(
        "new", help="write a new claim with its task, kernel and test, from a working example",
        description="Write claims/ID.yaml, kernels/MECHANISM/task.py, kernels/MECHANISM/kernel.py and "
                    "tests/kernels/test_MECHANISM.py: a small prefix-sum example that passes check and "
                    "runs as it is. Replace it block by block (the comments marked CHANGE say what).")
    p.add_argument("id", metavar="ID", help="the claim id: lowercase letters, digits and '-'")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                   help="the hardware the claim is about (default: cpu)")
    p.add_argument("--entry", default=None, metavar="NAME",
                   help="the LIST.md entry it belongs to, or 'Section > Name' "
                        "(default: the prefix-scan entry the example fits)")
    p.add_argument("--mechanism", default=None, metavar="NAME",
                   help="the folder under kernels/ (default: the id with '-' as '_')")
    p.set_defaults(func=run)


def run(args) -> int:
    from claimbench.scaffold import plan, write

    root = find_root(args.root)
    sc = plan(root, args.id, args.device, entry=args.entry, mechanism=args.mechanism)
    for path in write(root, sc):
        print(f"wrote {path.relative_to(root)}")
    claim = f"claims/{sc.claim_id}.yaml"
    print("next:")
    for step in (f"claimbench check {claim}",
                 f"python -m pytest -q tests/kernels/test_{sc.mechanism}.py",
                 "git add the four files and commit: a record counts only when its code is committed",
                 f"claimbench run {claim}   (the record goes to results/runs/)",
                 "claimbench ingest && claimbench publish",
                 "git add LIST.md results/records && git commit"):
        print(f"  {step}")
    return EXIT_OK
