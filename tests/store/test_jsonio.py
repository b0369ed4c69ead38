"""jsonio: one meaning per JSON file. A key twice in one object is found on the quick path (no
escapes anywhere) and on the standard parser's (escapes), at any depth."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from claimbench.store.jsonio import loads_json, no_key_twice, twice_keyed


def _check(text: str):
    raw = text.encode("utf-8")
    return twice_keyed(raw, loads_json(raw))


@pytest.mark.parametrize("text", [
    '{"a": 1, "b": [1, 2, {"c": "x"}], "d": {"e": null}}',
    '{"reason": "a \\"quoted\\" word\\n", "a": "\\\\"}',  # escapes: the standard parser's path
    '{"k": "caf\\u00e9", "l": "café"}',
    '{"q": "a quote written as \\u0022, a backslash as \\u005c"}',
    '[]',
    '{}',
])
def test_unique_keys_pass(text):
    assert _check(text) is None


@pytest.mark.parametrize("text,key", [
    ('{"value": 9.9, "verdict": "verified", "value": 1.2}', "value"),  # the reader sees 9.9, the checker 1.2
    ('{"a": {"x": 1, "x": 1}}', "x"),  # the same value twice is still two readings of one file
    ('{"a": [{"n": "p"}, {"n": "q", "n": "r"}]}', "n"),
    ('{"why": "a \\"b\\"", "k": 1, "k": 2}', "k"),  # escapes elsewhere in the file
    ('{"v\\u0061lue": 1, "value": 2}', "value"),  # one key spelt two ways
])
def test_a_key_twice_is_named(text, key):
    assert _check(text) == key
    assert json.loads(text)  # what every other reader parses without a word


def test_the_quick_path_decides_a_runners_record(tmp_path):
    """The record writer's output has no escapes, so the quick path decides it."""
    import recordkit as rk

    from claimbench.store.record import record_json

    root, _ = rk.standard_tree(tmp_path / "proj")
    rec = rk.build(root, "softmax-online", created="2026-11-20T09:00:00.000000Z", kernel_us=100, baseline_us=300, seed=3)
    raw = record_json(rec).encode("utf-8")
    assert b"\\" not in raw and twice_keyed(raw, loads_json(raw)) is None
    forged = raw.replace(b'{\n', b'{\n "verdict": "verified",\n', 1)
    assert twice_keyed(forged, loads_json(forged)) == "verdict"


_TEXT = st.text(alphabet=st.sampled_from('ab"\\\\/\n\t\u00b1\u00d7é '), max_size=6)
_JSON = st.recursive(st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, allow_infinity=False) | _TEXT,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=12)


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(_TEXT, _JSON, min_size=1, max_size=4), ascii_only=st.booleans(), indent=st.sampled_from([None, 1]))
def test_the_count_agrees_with_the_standard_parser(obj, ascii_only, indent):
    """Any document, written either way (escapes of quotes, backslashes, controls and non-ASCII
    included): no key repeats; the same document with its first key written again in front has one."""
    raw = json.dumps(obj, ensure_ascii=ascii_only, indent=indent).encode("utf-8")
    assert twice_keyed(raw, loads_json(raw)) is None
    key = next(iter(obj))
    forged = b"{" + json.dumps(key, ensure_ascii=ascii_only).encode("utf-8") + b": 0, " + raw[1:]
    assert twice_keyed(forged, loads_json(forged)) == key


@pytest.mark.parametrize("depth", [300, 990])
def test_a_document_too_deep_to_walk_is_never_called_unique(depth):
    """orjson writes 255 levels and Python's parser reads about 1,000: past them the check cannot
    run, so the record is refused with that reason, never passed unchecked nor a crash of the worker."""
    from claimbench.store.record import RecordError, record_data

    raw = b'{"k": 1, "x": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}"
    with pytest.raises(ValueError, match="cannot be checked for a repeated key .Recursion limit"):
        twice_keyed(raw, loads_json(raw))
    with pytest.raises(RecordError, match="r.json: cannot be checked"):
        record_data(raw, "r.json")


@settings(max_examples=200, deadline=None)
@given(obj=st.dictionaries(_TEXT, _JSON, min_size=1, max_size=4), side=_JSON, ascii_only=st.booleans())
def test_pruned_sample_lists_never_hide_a_key_twice(obj, side, ascii_only):
    """The quick proof on a record's parse with its sample lists pruned (`record._without_samples`)
    passes no document with a key twice, whatever those lists hold (strings and objects with
    repeated keys included), and record_data refuses each such document."""
    from claimbench.store.record import RecordError, _without_samples, record_data

    doc = {**obj, "kernel": {"samples_us": [side, 1.5], "rounds": side}, "baseline": {"processes": [side]}}
    raw = json.dumps(doc, ensure_ascii=ascii_only).encode("utf-8")
    assert record_data(raw, "r.json") == loads_json(raw)
    inner = json.dumps({"k": 1}, ensure_ascii=ascii_only).encode("utf-8")
    for at in (b'"samples_us": [', b'"processes": ['):
        forged = raw.replace(at, at + b'{"k": 0, ' + inner[1:] + b", ", 1)
        assert not no_key_twice(forged, _without_samples(loads_json(forged)))
        with pytest.raises(RecordError, match="appears twice"):
            record_data(forged, "r.json")
