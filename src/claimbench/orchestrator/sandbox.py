"""Where the claim's processes run: inside bubblewrap when it is installed, else as the user.

bubblewrap (`bwrap`, packaged by Debian and used by Flatpak) gives the claim's processes a
read-only view of the whole file system (the project and results/ included), a private /tmp, its
own PID namespace (it cannot see or signal the orchestrator, pytest or anything else), no network
for single-machine claims, and death with its parent. Without it, Landlock (Linux 5.13+, nothing to
install, no privilege: machine/landlock.py) confines each side before its claim code loads: it may
write only the run's scratch folder and the device nodes, and signal only its own processes, so
the project and results are read-only to it and a change there during the run is somebody else's.
Without either, the fallback is what Linux gives without privileges: the fork server as child
subreaper, a memory limit, a census of the files the run must not change (undone afterwards), and
records written only after every claim process is gone. The record says which one ran.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional


@dataclass(frozen=True)
class Sandbox:
    """The sandbox a fork server's processes run in and what it lets through; `kind` goes into the record."""

    kind: str                      # "bwrap" | "landlock" | "none"
    why: str = ""                  # why not bwrap (landlock) or neither (none)
    cuda: bool = False
    network: bool = False

    @property
    def confines_writes(self) -> bool:
        """The claim's processes cannot write the project or the results: a change found there after
        the run is somebody else's, never to be undone (issue 25)."""
        return self.kind in ("bwrap", "landlock")

    def wrap(self, argv: list[str], root: Path) -> list[str]:
        """``argv`` behind bwrap's options (unchanged when kind is "none"): read-only /, private /tmp with a
        project or venv under /tmp still visible, HOME and caches in /tmp, working directory ``root``."""
        if self.kind != "bwrap":
            return argv
        opts = ["bwrap", "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--ro-bind", "/", "/", "--proc", "/proc"]
        if not self.network:
            opts.append("--unshare-net")
        if self.cuda:  # the driver needs its device nodes; /dev/shm stays private
            opts += ["--dev-bind", "/dev", "/dev", "--tmpfs", "/dev/shm"]
        else:
            opts += ["--dev", "/dev"]
        opts += ["--tmpfs", "/tmp"]
        for keep in _under_tmp([root, Path(sys.prefix), Path(__file__).resolve().parents[2]]):
            opts += ["--ro-bind", str(keep), str(keep)]  # a project (or venv) in /tmp stays visible, read-only
        opts += ["--setenv", "TMPDIR", "/tmp", "--setenv", "HOME", "/tmp",
                 "--setenv", "TRITON_CACHE_DIR", "/tmp/triton", "--setenv", "TORCHINDUCTOR_CACHE_DIR", "/tmp/inductor",
                 "--chdir", str(root)]
        return opts + ["--"] + argv


def _under_tmp(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        p = p.resolve()
        if p.is_relative_to("/tmp") and not any(p.is_relative_to(q) for q in out):
            out.append(p)
    return out


def choose(mode: str, *, cuda: bool, network: bool = False) -> Sandbox:
    """``mode``: "auto" (bwrap if it works here, else Landlock, else none), "bwrap" or "landlock"
    (required) or "none"."""
    if mode == "none":
        return Sandbox("none", "turned off (--sandbox none)")
    ok, why = bwrap_works() if mode != "landlock" else (False, "--sandbox landlock")
    if ok:
        return Sandbox("bwrap", cuda=cuda, network=network)
    if mode == "bwrap":
        raise SandboxUnavailable(f"--sandbox bwrap: {why}")
    from claimbench.machine.landlock import abi
    if abi() >= 1:
        return Sandbox("landlock", why, cuda=cuda, network=network)
    if mode == "landlock":
        raise SandboxUnavailable("--sandbox landlock: this kernel has no Landlock (Linux 5.13 or later)")
    return Sandbox("none", f"{why}; and this kernel has no Landlock (Linux 5.13 or later)")


class SandboxUnavailable(Exception):
    """--sandbox bwrap or landlock was asked for and cannot run here; "auto" falls back instead."""


_PROBE: Optional[tuple[bool, str]] = None


def bwrap_works() -> tuple[bool, str]:
    """bwrap is installed and can make the namespaces here (some containers forbid them)."""
    global _PROBE
    if _PROBE is None:
        exe = shutil.which("bwrap")
        if exe is None:
            _PROBE = (False, "bwrap is not installed (Debian: apt-get install bubblewrap)")
        else:
            try:
                r = subprocess.run([exe, "--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/",
                                    "--proc", "/proc", "--dev", "/dev", "true"], capture_output=True, timeout=20)
                _PROBE = (r.returncode == 0, "" if r.returncode == 0 else
                          f"bwrap cannot create its namespaces here: {r.stderr.decode(errors='replace').strip()[:200]}")
            except (OSError, subprocess.TimeoutExpired) as e:
                _PROBE = (False, f"bwrap failed to start: {e}")
    return _PROBE


def nvidia_devices() -> list[str]:
    """The /dev/nvidia* nodes present, sorted: what a CUDA claim's driver opens (wrap binds all of /dev for it)."""
    return sorted(glob.glob("/dev/nvidia*"))


def default_max_memory() -> int:
    """Three quarters of the machine's memory, shared by all of one claim's processes."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 3 // 4)
    except (ValueError, OSError):
        return 16 << 30
