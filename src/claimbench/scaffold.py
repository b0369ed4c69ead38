"""`claimbench new`: a claim, its task and kernel modules and a test, that pass `check` and run.

The files are a small, honest example (a one-pass prefix sum against the same sums as a
triangular matrix product) rather than blanks: a contributor starts from something that works end
to end, `run`, `ingest` and `publish` included, and replaces it block by block, guided by the
comments marked CHANGE. The layout is the project's: `kernels/<mechanism>/task.py` (inputs,
reference, baseline) and `kernels/<mechanism>/kernel.py` (the kernel), the test under
`tests/kernels/`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from typing import Optional

from claimbench.errors import UsageError, UserError

ID_PATTERN = re.compile(r"[a-z0-9][a-z0-9-]{0,99}")
MECHANISM_PATTERN = re.compile(r"[a-z_][a-z0-9_]{0,63}")
DEFAULT_ENTRY = "Single-pass Parallel Prefix Scan with Decoupled Look-back"

# Per device: the shape, the model globs, and the reason the claimed value holds.
_DEVICE = {
    "cpu": dict(rows=1024, cols=1024, models='["*"]', claim_reason=(
        "on the 2-core machine this template was written on, the scan took about 0.8 ms and the\n"
        "product 12 to 18 ms while other jobs shared the cores, so a claim of 2 (tolerance 0.2) leaves\n"
        "a margin of several times on any CPU whose BLAS is not thousands of times faster than its scan.")),
    "cuda": dict(rows=8192, cols=4096, models='["NVIDIA H100*", "NVIDIA H200*"]', claim_reason=(
        "from the operation count only, never measured: the product's 2 * rows * cols^2 = 275 GFLOP\n"
        "take about 4.6 ms at a float32 rate of 60 TFLOP/s (torch keeps TF32 off for float32 matmul by\n"
        "default), while the scan moves 256 MB, under 0.1 ms at 3 TB/s, so a claim of 2 leaves a wide\n"
        "margin. Run it on the GPU before you trust it.")),
}


@dataclass(frozen=True)
class Scaffold:
    claim_id: str
    mechanism: str
    device: str
    entry: str

    def files(self) -> dict[str, str]:
        """Project-relative path -> template name."""
        return {f"claims/{self.claim_id}.yaml": "claim.yaml.tmpl",
                f"kernels/{self.mechanism}/task.py": "task.py.tmpl",
                f"kernels/{self.mechanism}/kernel.py": "kernel.py.tmpl",
                f"tests/kernels/test_{self.mechanism}.py": "test.py.tmpl"}

    def render(self, template: str) -> str:
        d = _DEVICE[self.device]
        text = resources.files("claimbench").joinpath("templates").joinpath("new").joinpath(template).read_text(encoding="utf-8")
        return Template(text).substitute(
            claim_id=self.claim_id, mechanism=self.mechanism, device=self.device, entry=_yaml_text(self.entry),
            models=d["models"], rows=d["rows"], cols=d["cols"], claim_reason=d["claim_reason"],
            shape_words=f"{d['rows']} x {d['cols']}")


def _yaml_text(s: str) -> str:
    """A plain YAML scalar when it is safe as one, else a double-quoted one."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9 .,()/+>_'-]*", s) and ": " not in s and " #" not in s:
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def plan(root: Path, claim_id: str, device: str = "cpu", *, entry: Optional[str] = None,
         mechanism: Optional[str] = None) -> Scaffold:
    """Validate the names against the project; nothing is written."""
    if not ID_PATTERN.fullmatch(claim_id):
        raise UsageError(f"claim id {claim_id!r}: use lowercase letters, digits and '-', starting with a "
                         "letter or digit (it becomes the file name claims/<id>.yaml)")
    mech = mechanism or claim_id.replace("-", "_")
    if mech[0].isdigit():
        mech = "k_" + mech
    if not MECHANISM_PATTERN.fullmatch(mech):
        raise UsageError(f"--mechanism {mech!r}: use lowercase letters, digits and '_' (a Python module name)")
    if device not in _DEVICE:
        raise UsageError(f"--device {device!r}: choose cpu or cuda")
    if not (root / "claims").is_dir() or not (root / "kernels").is_dir():
        raise UsageError(f"{root}: not a claimbench project (no claims/ and kernels/ folders); "
                         "run from the project or pass --root")
    entry = _entry(root, entry)
    sc = Scaffold(claim_id, mech, device, entry)
    for rel in sc.files():  # every folder on the way, then the file: never through a link (written outside
        # the project, then removed, before) and never over a dangling one (a traceback before)
        for part in [*reversed(Path(rel).parents)][1:]:
            if (root / part).is_symlink():
                raise UsageError(f"{part}: a symbolic link; `new` writes only into the project's own folders; "
                                 "replace it with a folder, or choose another --mechanism")
            if os.path.lexists(root / part) and not (root / part).is_dir():
                raise UsageError(f"{part}: a file where `new` needs a folder; move it, or choose another --mechanism")
        if os.path.lexists(root / rel):
            raise UsageError(f"{rel}: already exists; choose another id or --mechanism, or remove it")
    return sc


def _entry(root: Path, entry: Optional[str]) -> str:
    """The list entry the claim attaches to; it must resolve, as `check` will require."""
    from claimbench.spec.project import load_listing

    listing = load_listing(root)
    if listing is None:
        raise UsageError(f"{root / 'LIST.md'}: no list; a claim attaches to one of its entries")
    want = entry or DEFAULT_ENTRY
    try:
        listing.find(want)
        return want
    except UserError as e:
        if entry is None:
            raise UsageError(f"--entry: the example's default entry {DEFAULT_ENTRY!r} is not in LIST.md; "
                             "name the entry your claim belongs to with --entry") from None
        hint = "" if "did you mean" in str(e) else f"; `claimbench list` shows the list's {len(listing.entries)} entries"
        raise UsageError(f"--entry: {e}{hint}") from None


def write(root: Path, sc: Scaffold) -> list[Path]:
    """Write the files (none exists: `plan` checked), then check the claim; undo on a failure."""
    written: list[Path] = []
    try:
        for rel, template in sc.files().items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "x", encoding="utf-8") as f:
                f.write(sc.render(template))
            written.append(path)
        _check(root, written[0])
    except BaseException:
        for path in reversed(written):
            path.unlink(missing_ok=True)
        folder = root / "kernels" / sc.mechanism
        if folder.is_dir() and not any(p for p in folder.iterdir() if p.name != "__pycache__"):
            for p in folder.glob("__pycache__"):
                for pyc in p.iterdir():
                    pyc.unlink()
                p.rmdir()
            folder.rmdir()
        raise
    return written


def _check(root: Path, claim: Path) -> None:
    from claimbench.gate.policy import gate_file
    from claimbench.spec.project import load_listing

    result = gate_file(claim, root, load_listing(root))
    if not result.ok:
        raise UserError("the new claim does not pass check (nothing was kept): "
                        + "; ".join(str(p) for p in result.problems))
