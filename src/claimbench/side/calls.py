"""Calling claim code, and accepting only what it really returned.

An output must be exactly `torch.Tensor` (or exactly a tuple or list of them) with no instance
attributes, and torch's function-mode and dispatch-mode stacks must be as they were before the
call: a subclass, an overridden method, a container that computes when iterated, or a mode left
active would let the value change when the harness touches it. Everything the harness then does
with an output uses methods looked up on the class (`torch.Tensor.copy_(t, ...)`), never on t.
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any, Callable, Literal

import torch


class ClaimCodeError(Exception):
    """Claim code raised, or returned something the harness refuses; `verdict` says which."""

    def __init__(self, key: str, message: str, *, tb: str = "",
                 verdict: Literal["error", "incorrect", "rejected"] = "error") -> None:  # as messages.Failed has it
        super().__init__(message)
        self.key, self.message, self.tb, self.verdict = key, message, tb, verdict


def where(fn: Callable) -> str:
    """Where ``fn`` is defined, as file:line from kernels/ on (or its name), for messages about claim code."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return getattr(fn, "__qualname__", repr(fn))
    return f"{_short(code.co_filename)}:{code.co_firstlineno}"


def _short(path: str) -> str:
    p = Path(path)
    parts = p.parts
    return str(Path(*parts[parts.index("kernels"):])) if "kernels" in parts else p.name


def describe(args: tuple, kwargs: dict) -> str:
    """The call's arguments in short (tensors as dtype, shape, device), for the error when ``fn`` cannot take them."""
    def one(x: Any) -> str:
        if isinstance(x, torch.Tensor):
            return f"Tensor({str(x.dtype).replace('torch.', '')}, {'x'.join(map(str, x.shape)) or 'scalar'}, {x.device.type})"
        r = repr(x)
        return r if len(r) <= 40 else r[:37] + "..."
    return ", ".join([one(a) for a in args] + [f"{k}={one(v)}" for k, v in kwargs.items()])


def call_claim_code(key: str, fn: Callable, args: tuple, *, kwargs: dict) -> Any:
    """``fn(*args, **kwargs)``; anything it raises becomes a ClaimCodeError naming ``key``."""
    try:
        return fn(*args, **kwargs)
    except TypeError as e:
        tb = e.__traceback__
        if tb is not None and tb.tb_next is None:  # raised while binding the arguments, not inside fn
            name = getattr(fn, "__name__", "fn")
            raise ClaimCodeError(key, f"{key} ({where(fn)}) cannot take the call it received, "
                                 f"{name}({describe(args, kwargs)}): {e}") from None
        raise ClaimCodeError(key, f"{key} ({where(fn)}) raised TypeError: {e}", tb=traceback.format_exc()) from None
    except ClaimCodeError:
        raise
    except BaseException as e:  # SystemExit and KeyboardInterrupt from claim code are its failures too
        first = (str(e).strip().splitlines() or [""])[0][:400]
        raise ClaimCodeError(key, f"{key} ({where(fn)}) raised {type(e).__name__}: {first}",
                             tb=traceback.format_exc()[-6000:]) from None


def mode_depths() -> tuple[int, int]:
    """(torch function modes, dispatch modes) currently active."""
    return int(torch._C._len_torch_function_stack()), int(torch._C._len_torch_dispatch_stack())


def normalize_outputs(value: Any, key: str) -> tuple[torch.Tensor, ...]:
    """Claim code's return value as a tuple of exact, attribute-free tensors; anything else is rejected
    as a ClaimCodeError naming ``key``."""
    if type(value) is torch.Tensor:
        items: tuple = (value,)
    elif type(value) in (tuple, list):
        items = tuple(value)  # an exact tuple or list: iterating it runs no claim code
    else:
        raise ClaimCodeError(key, f"{key} returned a {type(value).__module__}.{type(value).__qualname__}, not a plain "
                             "torch.Tensor or an exact tuple or list of them", verdict="rejected")
    for i, t in enumerate(items):
        if type(t) is not torch.Tensor:
            raise ClaimCodeError(key, f"{key}: output {i} is a {type(t).__module__}.{type(t).__qualname__}, "
                                 "not a plain torch.Tensor", verdict="rejected")
        extra = sorted(object.__getattribute__(t, "__dict__"))
        if extra:
            raise ClaimCodeError(key, f"{key}: output {i} carries instance attributes ({', '.join(extra[:5])}); "
                                 "a plain tensor has none", verdict="rejected")
    return items
