"""Property: no mutation of a valid claim crashes the checker; each passes or yields located problems."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claimbench.gate.policy import gate_file
from claimbench.spec.listing import parse_list

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VALID = FIXTURES / "claims" / "valid" / "softmax-cpu.yaml"
BASE = yaml.safe_load(VALID.read_text(encoding="utf-8"))
LISTING = parse_list((FIXTURES / "LIST.md").read_text(encoding="utf-8"), "LIST.md")

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10**6, 10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, -1, 0.0, -0.0, 1e-12, 1e308, float("nan"), float("inf"), -float("inf")]),
    st.text(max_size=30),
    st.sampled_from(["", "kernels/softmax_cpu.py:nope", "../x.py:f", "/etc/x.py:f", "cuda", "bfloat16",
                     "http://x", "baseline-float64", "rows * cols", "__import__('os')", "vendor-datasheet"]),
)
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(min_size=1, max_size=10), inner, max_size=3)), max_leaves=6)


def _paths(node, prefix=()):
    """Every key path into the mapping/list tree, containers included."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield prefix + (k,)
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield prefix + (i,)
            yield from _paths(v, prefix + (i,))


PATHS = list(_paths(BASE))


def _at(data, path):
    for k in path:
        data = data[k]
    return data


MAPPINGS = [()] + [p for p in PATHS if isinstance(_at(BASE, p), dict)]


@st.composite
def mutation(draw):
    kind = draw(st.sampled_from(["delete", "replace", "add", "perturb"]))
    if kind == "add":
        return kind, draw(st.sampled_from(MAPPINGS)), draw(st.text(min_size=1, max_size=12)), draw(values)
    path = draw(st.sampled_from(PATHS))
    if kind == "perturb":
        factor = draw(st.sampled_from([-1, 0, 1e-9, 10, 1e9, float("nan"), float("inf")]))
        return kind, path, None, factor
    return kind, path, None, draw(values) if kind == "replace" else None


def _apply(data, muts):
    for kind, path, key, value in muts:
        try:
            parent = _at(data, path[:-1]) if kind != "add" else _at(data, path)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
        if kind == "add":
            if isinstance(parent, dict):
                parent[key] = value
        elif kind == "delete":
            if isinstance(parent, (dict, list)):
                try:
                    del parent[path[-1]]
                except (KeyError, IndexError, TypeError):
                    pass
        else:
            try:
                old = parent[path[-1]]
            except (KeyError, IndexError, TypeError):
                continue
            if kind == "replace":
                parent[path[-1]] = value
            elif isinstance(old, (int, float)) and not isinstance(old, bool):
                parent[path[-1]] = old * value
    return data


def _assert_sane(result):
    if result.ok:
        return
    assert result.problems, "a rejected claim must say why"
    for p in result.problems:
        assert p.path and isinstance(p.line, int) and p.line >= 1, p
        assert p.key and p.message, p


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(mutation(), min_size=1, max_size=3))
def test_structured_mutations_never_crash(tmp_path, muts):
    data = _apply(copy.deepcopy(BASE), muts)
    path = tmp_path / "softmax-cpu.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True), encoding="utf-8")
    _assert_sane(gate_file(path, FIXTURES, LISTING))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_text_mutations_never_crash(tmp_path, data):
    raw = VALID.read_bytes()
    pos = data.draw(st.integers(0, len(raw)))
    cut = data.draw(st.integers(0, 20))
    junk = data.draw(st.binary(max_size=12) | st.sampled_from([b"&a ", b"*a", b": :", b"\t", b"{", b"- ", b"!!python/name:os.system "]))
    path = tmp_path / "softmax-cpu.yaml"
    path.write_bytes(raw[:pos] + junk + raw[pos + cut:])
    _assert_sane(gate_file(path, FIXTURES, LISTING))
