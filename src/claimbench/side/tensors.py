"""Tensors in and out of memfds: how inputs, references and outputs cross process boundaries.

A memfd is anonymous shared memory passed by descriptor. The task side writes its inputs and
references into memfds of its own; the orchestrator copies inputs into memfds it owns for each
side, and on CPU the side's operands are views of those pages, so the orchestrator can change an
element between two samples without the side taking part.
"""

from __future__ import annotations

import mmap
import os
from typing import Any

import numpy as np
import torch

from claimbench.orchestrator import messages as m

# each element's width as torch and numpy integers, for the sign flip (torch has no wide unsigned XOR)
_SIGNED = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_NP_SIGNED = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}

DTYPES = {name: getattr(torch, name) for name in (
    "float64", "float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2",
    "int64", "int32", "int16", "int8", "uint8", "bool") if hasattr(torch, name)}
NAMES = {v: k for k, v in DTYPES.items()}


def dtype_name(dt: torch.dtype) -> str:
    """The dtype's name as messages carry it; TypeError for a dtype the harness cannot check."""
    try:
        return NAMES[dt]
    except KeyError:
        raise TypeError(f"tensors of dtype {dt} cannot be checked (supported: {', '.join(DTYPES)})") from None


def to_memfd(t: torch.Tensor, fd_index: int) -> tuple[int, m.TensorItem]:
    """A new memfd holding ``t``'s contiguous bytes (copied from the device if need be)."""
    name = dtype_name(t.dtype)
    nbytes = t.numel() * t.element_size()
    fd = os.memfd_create("claimbench-tensor", 0)
    if nbytes:
        os.ftruncate(fd, nbytes)
        with mmap.mmap(fd, nbytes) as mm:
            dst = torch.frombuffer(mm, dtype=torch.uint8, count=nbytes)
            torch.Tensor.copy_(dst, torch.Tensor.contiguous(t).reshape(-1).view(torch.uint8))
            del dst
    return fd, m.TensorItem(dtype=name, shape=list(t.shape), nbytes=nbytes, fd=fd_index)


class Mapped:
    """A memfd mapped into this process, and a CPU tensor viewing its pages."""

    def __init__(self, fd: int, item: m.TensorItem) -> None:
        dt = DTYPES.get(item.dtype)
        if dt is None:
            raise TypeError(f"unsupported dtype {item.dtype}")
        self.item = item
        self.mm = mmap.mmap(fd, item.nbytes) if item.nbytes else None
        if self.mm is None:
            self.tensor = torch.empty(item.shape, dtype=dt)
        else:
            self.tensor = torch.frombuffer(self.mm, dtype=torch.uint8, count=item.nbytes).view(dt).reshape(item.shape)


def buffer(t: torch.Tensor, *, ptr: int | None = None, staged: bool = False) -> m.Buffer:
    """Where ``t`` lives: its data (or a staged host copy at ``ptr``), shape, strides, storage."""
    storage = torch.Tensor.untyped_storage(t)
    es = t.element_size()
    span = (1 + sum((d - 1) * s for d, s in zip(t.shape, t.stride()))) * es if t.numel() else 0
    return m.Buffer(dtype=dtype_name(t.dtype), shape=list(t.shape), strides=list(t.stride()),
                    ptr=int(ptr if ptr is not None else torch.Tensor.data_ptr(t)), span_bytes=span,
                    device=t.device.type, storage=(int(storage.data_ptr()), int(storage.nbytes())), staged=staged)


def stage(t: torch.Tensor) -> torch.Tensor:
    """A pinned host copy of a CUDA tensor, for the orchestrator to read."""
    host = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, pin_memory=True)
    torch.Tensor.copy_(host, t)
    return host


def poison(items: Any) -> None:
    """Overwrite before freeing, so memory handed out again holds no answer."""
    for t in items if isinstance(items, (tuple, list)) else (items,):
        if type(t) is torch.Tensor and t.numel():
            with torch.no_grad():
                if t.is_floating_point():
                    torch.Tensor.fill_(t, float("nan"))
                elif t.dtype != torch.bool:
                    info = torch.iinfo(t.dtype)
                    torch.Tensor.fill_(t, info.min if t.dtype.is_signed else info.max)


def set_elements(t: torch.Tensor, edit) -> None:
    """Apply a perturbation (messages.Edit) to a contiguous tensor: its elements' bytes at once."""
    from claimbench.orchestrator.perturb import byte_indices, edit_indices

    if not torch.Tensor.is_contiguous(t):  # reshape would copy it, and the edit would change the copy
        raise ValueError(f"operand {edit.operand} is not contiguous: an edit of C-order elements cannot go into it")
    es = torch.Tensor.element_size(t)
    idx = edit_indices(edit)
    raw = bytes.fromhex(edit.raw)
    if len(raw) != idx.size * es or (idx.size and (idx.min() < 0 or idx.max() >= torch.Tensor.numel(t))):
        raise ValueError(f"an edit of {idx.size} elements does not fit operand {edit.operand}")
    byte_idx = torch.from_numpy(byte_indices(idx, es).copy()).to(t.device)
    if idx.size:  # a shift of rows in order comes with no sparse part (perturb.plan_edit)
        flat = torch.Tensor.view(torch.Tensor.reshape(t, -1), torch.uint8)
        flat[byte_idx] = torch.frombuffer(bytearray(raw), dtype=torch.uint8).to(t.device)
    if edit.signs is not None or edit.shift is not None:  # the dense part last, as perturb.apply_to_bytes
        _flip(t, edit, es)


def _flip(t: torch.Tensor, edit, es: int) -> None:
    """The dense part of an edit, as `signs.flip_bytes` and `signs.shift_sorted` write it into the
    orchestrator's pages, element for element."""
    from claimbench.orchestrator.signs import CHUNK, FIELDS, float_passes, sign_chunks

    name = str(t.dtype).removeprefix("torch.")
    step = CHUNK if t.device.type == "cpu" else CHUNK << 6  # 4M elements a copy to a device
    flat = torch.Tensor.reshape(t, -1)
    flat = torch.Tensor.view(flat, torch.uint8) if t.dtype == torch.bool else flat
    if edit.shift is not None:  # rows in order: the ends of every row move by one, inside its own range
        p, q = edit.shift
        rows = torch.Tensor.view(flat, -1, int(t.shape[-1]) if t.dim() else 1)
        lo = torch.Tensor.amin(rows, dim=1, keepdim=True)
        hi = torch.Tensor.amax(rows, dim=1, keepdim=True)
        head, tail = rows[:, :p], rows[:, q:]  # as signs.shift_sorted: no wrap at a dtype's ends
        torch.Tensor.sub_(head, torch.Tensor.to(head > lo, rows.dtype))
        torch.Tensor.add_(tail, torch.Tensor.to(tail < hi, rows.dtype))
    if edit.signs is None:
        return
    if name not in FIELDS:  # an integer or boolean, as signs.change_ints: one step within its range
        if edit.low is None:
            raise ValueError(f"an integer change of operand {edit.operand} carries no range")
        lo, hi = edit.low
        for start, mask in sign_chunks(edit.signs, torch.Tensor.numel(flat), es, chunk=CHUNK, bit=1):
            part = flat[start:start + mask.size]
            where = torch.from_numpy(np.flatnonzero(mask)).to(t.device)
            got = part[where]
            step = torch.where(got < hi, got + 1, torch.where(got > lo, got - 1, got))
            torch.Tensor.index_copy_(part, 0, where, torch.Tensor.to(step, got.dtype))
        return
    exp, top = FIELDS[name]
    words = torch.Tensor.view(flat, _SIGNED[es])
    field = torch.tensor(exp, dtype=_SIGNED[es], device=t.device)  # every exponent field fits the signed width
    for on_mantissa, stream in float_passes(edit.mantissa):  # the sign, then the mantissa, as signs.flip_bytes
        for start, mask in sign_chunks(edit.signs, torch.Tensor.numel(words), es, chunk=step,
                                       bit=top if on_mantissa else None, stream=stream):
            part = words[start:start + mask.size]
            flips = torch.from_numpy(mask.view(_NP_SIGNED[es])).to(t.device)
            got = torch.Tensor.bitwise_and(part, field)  # as signs.flip_bytes: never an infinity or a NaN,
            if on_mantissa:  # nor a zero's mantissa, nor a subnormal's only bit
                low = torch.Tensor.bitwise_and(part, torch.tensor(top - 1, dtype=_SIGNED[es], device=t.device))
                keep = (got != field) & ((got != 0) | (low != 0))
            else:
                keep = got != field
            torch.Tensor.bitwise_xor_(part, torch.Tensor.mul(flips, keep))
