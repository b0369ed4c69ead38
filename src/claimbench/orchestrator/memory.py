"""Memory the orchestrator owns: the sides' input pages, and copies of what the sides computed.

Outputs are read straight out of a side's address space with `process_vm_readv` while the side
is stopped: the kernel cannot change a value after the orchestrator looked, compute it only when
asked, or hand the harness a copy of its choosing. Where the kernel forbids reading (no ptrace
permission), the claim cannot be verified; the run says so.
"""

from __future__ import annotations

import bisect
import ctypes
import mmap
import os
from typing import Optional

import numpy as np

from claimbench.orchestrator import messages as m
from claimbench.verify import codec

_libc = ctypes.CDLL(None, use_errno=True)
MAX_READ_BYTES = 16 << 30


class _IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


class ReadError(Exception):
    """The orchestrator could not read a side's memory."""


def read_remote(pid: int, addr: int, nbytes: int) -> np.ndarray:
    """``nbytes`` from address ``addr`` of process ``pid``, into a fresh numpy byte array."""
    if nbytes < 0 or nbytes > MAX_READ_BYTES:
        raise ReadError(f"refusing to read {nbytes} bytes")
    out = np.empty(nbytes, dtype=np.uint8)
    _transfer(_libc.process_vm_readv, pid, addr, local_bytes=out, name="process_vm_readv", none="nothing read")
    return out


def write_remote(pid: int, addr: int, data: np.ndarray) -> None:
    """Write ``data`` (bytes) at address ``addr`` of process ``pid``, which must be stopped: how a kernel's
    passed-through operands get each sample's changes without the kernel's side running after them."""
    raw = np.ascontiguousarray(data).view(np.uint8).reshape(-1)
    _transfer(_libc.process_vm_writev, pid, addr, local_bytes=raw, name="process_vm_writev", none="nothing written")


def _transfer(call, pid: int, addr: int, *, local_bytes: np.ndarray, name: str, none: str) -> None:
    """``local_bytes`` to or from ``addr`` of process ``pid`` with ``call`` (process_vm_readv or _writev),
    a gigabyte at a time, until all of it has moved."""
    done, nbytes = 0, local_bytes.size
    while done < nbytes:
        chunk = min(nbytes - done, 1 << 30)
        local = _IoVec(local_bytes.ctypes.data + done, chunk)
        remote = _IoVec(addr + done, chunk)
        got = call(pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if got <= 0:
            err = ctypes.get_errno()
            raise ReadError(f"{name} of process {pid} failed: {os.strerror(err) if err else none}")
        done += got


def read_buffer(pid: int, buf: m.Buffer) -> np.ndarray:
    """The numbers of a tensor a side reported, decoded by the orchestrator from bytes it read."""
    if buf.device != "cpu" and not buf.staged:
        raise ReadError(f"a {buf.device} tensor must be staged to the host before it is read")
    span = codec.span_bytes(buf.dtype, buf.shape, buf.strides)
    if span > buf.span_bytes + codec.itemsize(buf.dtype):
        raise ReadError(f"the side reported {buf.span_bytes} bytes for a tensor that spans {span}")
    raw = read_remote(pid, buf.ptr, span) if span else np.empty(0, dtype=np.uint8)
    return codec.from_bytes(raw, buf.dtype, buf.shape, strides=buf.strides)


OPERAND_MEMFD = "claimbench-operand"  # the name every operand memfd of ours carries in /proc/<pid>/maps


def mappings(pid: int) -> list[tuple[int, int, str, str]]:
    """(start, end, permissions, path) of each mapping of process ``pid``, from the kernel's own
    account (``/proc/<pid>/maps``), which nothing in that process can rewrite."""
    return [_row(line) for line in _maps_lines(pid)]


def _maps_lines(pid: int) -> list[bytes]:
    with open(f"/proc/{pid}/maps", "rb") as f:
        return f.read().splitlines()


def _start(line: bytes) -> int:
    return int(line[:line.index(b"-")], 16)


def _row(line: bytes) -> tuple[int, int, str, str]:
    parts = line.split(maxsplit=5)
    lo, hi = (int(x, 16) for x in parts[0].split(b"-"))
    path = parts[5].strip().decode("utf-8", "replace") if len(parts) > 5 else ""
    return lo, hi, parts[1].decode("ascii", "replace"), path


def misplaced(pid: int, ptr: int, nbytes: int) -> str:
    """Why the ``nbytes`` from ``ptr`` in process ``pid`` cannot be a tensor the process computed,
    or "": they must lie in readable mappings, none of them our operand pages. The span comes from
    the shape and strides the orchestrator decodes with, never from a storage range the side states."""
    if not nbytes:
        return ""
    lo, hi, covered = ptr, ptr + nbytes, ptr
    for start, end, perms, path in _around(pid, lo, hi):
        if end <= lo or start >= hi:
            continue
        if path.startswith(f"/memfd:{OPERAND_MEMFD}"):
            return f"lies in the input pages the orchestrator gave it ({start:#x}-{end:#x})"
        if start > covered or "r" not in perms:
            break
        covered = max(covered, end)
    return "" if covered >= hi else f"spans {lo:#x}-{hi:#x}, which the process has not mapped readable"


def _around(pid: int, lo: int, hi: int) -> list[tuple[int, int, str, str]]:
    """The mappings of ``pid`` that may overlap [lo, hi), in address order, the first of them found by
    bisection: the kernel lists a process's mappings in address order, and parsing all of a torch
    process's (about 400 lines, 0.6 ms) for each output checked was a tenth of the orchestrator's time."""
    lines = _maps_lines(pid)
    first = max(0, bisect.bisect_right(lines, lo, key=_start) - 1)  # the last mapping starting at or below lo
    out = []
    for line in lines[first:]:
        row = _row(line)
        if row[0] >= hi:
            break
        out.append(row)
    return out


class OwnedBuffer:
    """A memfd of ours, mapped here; its descriptor is handed to a side, which maps the same pages."""

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes
        self.fd = os.memfd_create(OPERAND_MEMFD, 0)
        self.mm: Optional[mmap.mmap] = None
        if nbytes:
            os.ftruncate(self.fd, nbytes)
            self.mm = mmap.mmap(self.fd, nbytes)
        self.view = np.frombuffer(self.mm, dtype=np.uint8) if self.mm is not None else np.empty(0, np.uint8)

    def close(self) -> None:
        """Unmap and close the memfd; a mapping that a numpy view still holds is left to go with the process."""
        self.view = np.empty(0, np.uint8)
        if self.mm is not None:
            try:
                self.mm.close()
            except BufferError:  # a view still exists: the mapping goes with the process
                pass
        try:
            os.close(self.fd)
        except OSError:
            pass


def map_readonly(fd: int, nbytes: int) -> np.ndarray:
    """A private copy of a memfd's bytes (the task's inputs and references)."""
    if not nbytes:
        return np.empty(0, dtype=np.uint8)
    with mmap.mmap(fd, nbytes, prot=mmap.PROT_READ) as mm:
        return np.frombuffer(mm, dtype=np.uint8).copy()
