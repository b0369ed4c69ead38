"""Where the claim's processes run: inside bubblewrap when it is installed, else as the user.

bubblewrap (`bwrap`, packaged by Debian and used by Flatpak) gives the claim's processes a
read-only view of the whole file system (the project and results/ included), a private /tmp, its
own PID namespace (it cannot see or signal the orchestrator, pytest or anything else), no network
for single-machine claims, and death with its parent. Without it, the fallback is what Linux gives
without privileges: the fork server as child subreaper, a memory limit, a census of the files the
run must not change, and records written only after every claim process is gone. The record says
which one ran.
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

    kind: str                      # "bwrap" | "none"
    why: str = ""                  # why not bwrap, when kind is "none"
    cuda: bool = False
    network: bool = False

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
    """``mode``: "auto" (bwrap if it works here), "bwrap" (required) or "none"."""
    if mode == "none":
        return Sandbox("none", "turned off (--sandbox none)")
    ok, why = bwrap_works()
    if ok:
        return Sandbox("bwrap", cuda=cuda, network=network)
    if mode == "bwrap":
        raise SandboxUnavailable(f"--sandbox bwrap: {why}")
    return Sandbox("none", why)


class SandboxUnavailable(Exception):
    """--sandbox bwrap was asked for and bwrap cannot run here; "auto" falls back to none instead."""


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
