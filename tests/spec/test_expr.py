"""flops/bytes expressions: arithmetic over params only, parsed against a whitelist, never eval'd."""

from __future__ import annotations

import pytest

from claimbench.spec import expr

PARAMS = {"rows": 3, "cols": 1000, "name": "x", "flag": True}


@pytest.mark.parametrize("text,value", [
    ("5 * rows * cols", 15000.0),
    ("2 * rows * cols * 2", 12000.0),
    ("(rows + 1) // 2 + cols % 7", 2 + 1000 % 7),
    ("-rows + 2 ** 3", 5.0),
    ("max(rows, 4) * ceil(cols / 512)", 8.0),
    ("log2(cols * 1.024)", 10.0),
])
def test_arithmetic_evaluates(text, value):
    assert expr.evaluate(text, PARAMS) == pytest.approx(value)


@pytest.mark.parametrize("text,phrase", [
    ("__import__('os').system('touch /tmp/claimbench-expr-pwned')", "only min, max"),
    ("rows.__class__", "Attribute"),
    ("colz * 2", "'colz'"),
    ("name * 2", "'name'"),  # a string param is not a number
    ("flag + 1", "'flag'"),  # nor is a bool
    ("[rows]", "List"),
    ("rows if cols else 1", "IfExp"),
    ("lambda: 1", "Lambda"),
    ("'a' * 3", "not a number"),
    ("True + 1", "not a number"),
    ("max(rows, key=abs)", "only min, max"),
    ("abs(rows)", "only min, max"),
    ("rows < cols", "Compare"),
    ("rows & 1", "BitAnd"),
    ("", "empty"),
    ("rows *", "not an arithmetic expression"),
    ("1" + " + 1" * 300, "longer than"),
])
def test_anything_else_is_refused(text, phrase):
    with pytest.raises(expr.ExprError) as e:
        expr.evaluate(text, PARAMS)
    assert phrase in str(e.value)


def test_refused_code_runs_nothing(tmp_path):
    target = tmp_path / "pwned"
    with pytest.raises(expr.ExprError):
        expr.evaluate(f"__import__('os').system('touch {target}')", PARAMS)
    assert not target.exists()


@pytest.mark.parametrize("text", ["rows / 0", "10 ** 100000", "rows ** 1000", "9e307 * 10"])
def test_non_finite_or_huge_results_are_errors(text):
    with pytest.raises(expr.ExprError):
        expr.evaluate(text, PARAMS)


def test_huge_integers_are_an_expression_error_not_an_overflow():
    """A 401-digit param once raised OverflowError out of evaluate (float() of the result)."""
    big = int("7" * 401)
    with pytest.raises(expr.ExprError, match="cannot evaluate: int too large to convert to float"):
        expr.evaluate("rows * cols", {"rows": big, "cols": 2})
    with pytest.raises(expr.ExprError, match="cannot evaluate"):
        expr.evaluate("rows", {"rows": big})
