"""Whitelisted arithmetic for `workload.flops` and `workload.bytes`.

Claim text is never given to ``eval``: the expression is parsed with ``ast`` and only numbers,
names from ``params``, + - * / // % ** and parentheses, and a few pure functions are admitted.
"""

from __future__ import annotations

import ast
import math
import operator
from functools import lru_cache
from typing import Any, Callable, Mapping, Optional

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNOPS: dict[type, Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "ceil": math.ceil, "floor": math.floor, "log2": math.log2}
MAX_LEN = 500


class ExprError(ValueError):
    """The expression is not plain arithmetic over params."""


def parse(text: str, names: set[str] | frozenset[str]) -> ast.Expression:
    """Parse and validate; raise ``ExprError`` naming the first disallowed construct."""
    return _parse(text, frozenset(names)) if isinstance(text, str) else _parse_uncached(text, names)


@lru_cache(maxsize=4096)
def _parse(text: str, names: frozenset[str]) -> ast.Expression:
    """Cached: a claim evaluates one expression for every params set, and many claims share one."""
    return _parse_uncached(text, names)


def _parse_uncached(text, names) -> ast.Expression:
    if not isinstance(text, str) or not text.strip():
        raise ExprError("empty expression")
    if len(text) > MAX_LEN:
        raise ExprError(f"expression is longer than {MAX_LEN} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as e:
        raise ExprError(f"not an arithmetic expression ({e.msg})") from None
    for node in ast.walk(tree):
        _admit(node, names)
    return tree


def _admit(node: ast.AST, names) -> None:
    if isinstance(node, (ast.Expression, ast.Load)) or type(node) in _BINOPS or type(node) in _UNOPS:
        return
    if isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        return
    if isinstance(node, ast.UnaryOp):
        if type(node.op) not in _UNOPS:
            raise ExprError(f"operator {type(node.op).__name__} is not allowed")
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise ExprError(f"constant {node.value!r} is not a number")
        return
    if isinstance(node, ast.Name):
        if node.id not in names and node.id not in _FUNCS:
            raise ExprError(f"name {node.id!r} is not a workload param (known: {', '.join(sorted(names)) or 'none'})")
        return
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCS or node.keywords:
            raise ExprError("only min, max, ceil, floor and log2 may be called")
        return
    raise ExprError(f"{type(node).__name__} is not allowed; use numbers, params names and + - * / // % **")


def evaluate(text: str, params: Mapping[str, object]) -> float:
    """Evaluate over numeric params; raise ``ExprError`` for anything else or a non-finite result."""
    nums = {k: v for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    tree = parse(text, frozenset(nums))
    try:
        value = _eval(tree.body, nums)
        result = float(value) if isinstance(value, (int, float)) else math.nan
    except (ZeroDivisionError, OverflowError, ValueError) as e:  # float(10**400) overflows too
        raise ExprError(f"cannot evaluate: {e}") from None
    if not math.isfinite(result):
        raise ExprError("the result is not a finite number")
    return result


def _eval(node: ast.AST, nums: Mapping[str, float]):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return nums[node.id]
    if isinstance(node, ast.UnaryOp):
        return _UNOPS[type(node.op)](_eval(node.operand, nums))
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, nums), _eval(node.right, nums)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e12):
            raise ValueError("exponent too large")
        return _BINOPS[type(node.op)](left, right)
    if isinstance(node, ast.Call):
        assert isinstance(node.func, ast.Name)  # _admit let only calls of names in _FUNCS through
        return _FUNCS[node.func.id](*(_eval(a, nums) for a in node.args))
    raise ExprError(f"{type(node).__name__} is not allowed")


def workload_counts(workload: Any, at: Optional[Mapping[str, Any]] = None) -> tuple[Optional[float], Optional[float]]:
    """A claim's (flops, bytes) at its own params, None where it declares none: what the stopping rule,
    the record and the record-against-claim check all hold a number to. ``at`` overrides params (a
    sweep point's axis). Raises ``ExprError``."""
    params = {**workload.params, **(at or {})}
    return (evaluate(workload.flops, params) if workload.flops else None,
            evaluate(workload.bytes, params) if workload.bytes else None)
