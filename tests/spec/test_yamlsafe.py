"""Strict YAML: what PyYAML alone would accept (duplicates, aliases, odd bytes) is refused, located."""

from __future__ import annotations

import tracemalloc

import pytest

from claimbench.spec.yamlsafe import MAX_BYTES, YamlRejected, load_document, parse_document


def _reject(text: str | bytes):
    raw = text if isinstance(text, bytes) else text.encode("utf-8")
    with pytest.raises(YamlRejected) as e:
        parse_document(raw, "c.yaml")
    return e.value.problem


def test_lines_are_kept_per_key_path():
    doc = parse_document(b"a: 1\nb:\n  c: [x, y]\n  d: 2\n", "c.yaml")
    assert doc.data == {"a": 1, "b": {"c": ["x", "y"], "d": 2}}
    assert doc.lines[("b", "d")] == 4 and doc.lines[("b", "c", 1)] == 3
    assert doc.line_of(("b", "missing", "deeper")) == 2
    assert doc.line_of(("nothing",)) == 1


def test_duplicate_key_names_both_lines():
    p = _reject("a: 1\nb:\n  c: 1\n  c: 2\n")
    assert (p.line, p.key) == (4, "b.c") and "first at line 3" in p.message


def test_duplicate_top_level_key():
    p = _reject("a: 1\nb: 2\na: 3\n")
    assert (p.line, p.key) == (3, "a") and "first at line 1" in p.message


def test_billion_laughs_refused_without_expansion():
    rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    rows += [f"{c}: &{c} [" + ",".join([f"*{p}"] * 9) + "]" for p, c in zip("abcdefghi", "bcdefghij")]
    tracemalloc.start()
    try:
        p = _reject("\n".join(rows) + "\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert p.key == "yaml" and "anchors and aliases" in p.message and p.line == 1
    assert peak < 20 * 1024 * 1024  # 9**10 expanded strings would need far more than this


def test_alias_alone_refused():
    p = _reject("a: 1\nb: *x\n")
    assert p.key == "yaml"  # an undefined alias is a syntax problem or an alias refusal, never a crash


def test_custom_tag_refused():
    p = _reject("a: !!python/object:os.system ls\n")
    assert p.key == "a" and "tag" in p.message


def test_syntax_error_has_line_and_column():
    p = _reject("a: 1\nb: [1, 2\nc: 3\n")
    assert p.key == "yaml" and p.line >= 2 and "column" in p.message


def test_not_utf8_located():
    p = _reject(b"a: 1\nb: caf\xe9\n")
    assert (p.key, p.line) == ("file", 2) and "0xe9" in p.message


def test_bom_is_accepted():
    assert parse_document("\ufeffa: 1\n".encode("utf-8"), "c.yaml").data == {"a": 1}


@pytest.mark.parametrize("text,key", [("", "document"), ("# only a comment\n", "document"),
                                      ("- a\n- b\n", "document"), ("just a string\n", "document")])
def test_not_a_mapping(text, key):
    assert _reject(text).key == key


def test_oversized_file_refused_before_reading(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * MAX_BYTES)
    with pytest.raises(YamlRejected) as e:
        load_document(big)
    assert e.value.problem.key == "file" and "1 MiB" in e.value.problem.message


def test_missing_file_is_a_problem(tmp_path):
    with pytest.raises(YamlRejected) as e:
        load_document(tmp_path / "none.yaml")
    assert e.value.problem.key == "file"


def test_hostile_numbers_and_nesting_are_located_problems():
    from claimbench.spec.yamlsafe import YamlRejected, parse_document

    for text, line, key, start in [
        (b"a: 1\nb: " + b"9" * 5000 + b"\n", 2, "b", "a number of 5000 characters"),
        (b"a:\n  b: " + b"1" * 70 + b".5\n", 2, "a.b", "a number of 72 characters"),
        (b"a: " + b"[" * 990 + b"]" * 990 + b"\n", 1, "yaml", "values nested more than 16 levels deep"),
        (b"a: " + b"{b: " * 20 + b"1" + b"}" * 20 + b"\n", 1, "yaml", "values nested more than 16 levels deep"),
        (b"when: 2026-02-30\n", 1, "when", "cannot be read as timestamp: day is out of range for month"),
    ]:
        with pytest.raises(YamlRejected) as e:
            parse_document(text, "c.yaml")
        p = e.value.problem
        assert (p.line, p.key) == (line, key) and p.message.startswith(start), str(p)


@pytest.mark.parametrize(("text", "why"), [
    (b"workload:\n  params: {n: 123456789012345678901234567890}\n", "integer past 64 bits"),
    (b"workload:\n  params: {n: -9223372036854775809}\n", "integer past 64 bits"),
    (b"workload:\n  params: {x: .inf}\n", "not a finite number"),
    (b"workload:\n  params: {x: -.Inf}\n", "not a finite number"),
    (b"claimed:\n  value: .nan\n", "not a finite number"),
])
def test_a_number_json_cannot_carry_as_itself_is_one_located_problem(text, why):
    """A record copies its claim: an integer past 64 bits made audit and publish stop with orjson's
    TypeError, and NaN or infinity would be written as null (an adversarial review, 2026-12-06)."""
    with pytest.raises(YamlRejected) as e:
        parse_document(text, "c.yaml")
    p = e.value.problem
    assert (p.path, p.line) == ("c.yaml", 2) and why in p.message, p


def test_the_largest_numbers_json_carries_are_kept():
    doc = parse_document(b"workload:\n  params: {a: 18446744073709551615, b: -9223372036854775808, c: 1.0e+308}\n", "c.yaml")
    assert doc.data["workload"]["params"] == {"a": 2**64 - 1, "b": -2**63, "c": 1.0e308}


def test_a_claim_linked_to_a_device_is_refused_unread(tmp_path):
    """`site` globbed claims/*.yaml and read each whole: a claim committed as a link to /dev/zero took it
    to 24 GB (an adversarial review; /dev/zero's size says 0). Every claim is read through the bounded
    reader now: never through a link, a regular file only, at most 1 MiB."""
    import subprocess
    import sys

    import recordkit as rk

    from claimbench.spec.yamlsafe import YamlRejected, load_document

    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    with pytest.raises(YamlRejected, match="a symlink"):
        load_document(link)
    root, _ = rk.standard_tree(tmp_path / "proj")
    (root / "claims" / "zero.yaml").symlink_to("/dev/zero")
    guard = "import resource; resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30)); "  # never 24 GB here
    code = guard + f"from claimbench.cli import main; raise SystemExit(main(['--root', {str(root)!r}, 'site']))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1) and "MemoryError" not in p.stderr and "Traceback" not in p.stderr, p.stderr[-2000:]
