"""Strict YAML: the subset that every YAML parser reads the same way.

PyYAML silently keeps the last of duplicate keys and expands aliases (a "billion laughs" file
grows without bound), so claims are read through the composed node tree instead, with anchors,
aliases, custom tags, duplicate keys, non-UTF-8 text and oversized files refused. So are values
nested deeper than any claim needs (a thousand brackets would exhaust Python's recursion) and
numbers longer than any claim needs (Python refuses to convert integers over 4,300 digits,
and a float(10**400) overflows): each is one located problem, never a traceback. Every value
keeps the line it came from, so a later check can say where a problem is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from claimbench.spec.bounded import UnreadableFile, read_bytes
from claimbench.spec.problem import Problem

MAX_BYTES = 1 << 20
MAX_DEPTH = 16  # a claim nests three levels deep; check_params four
MAX_NUMBER_CHARS = 64  # 2**64 has 20 digits; no size, rate or tolerance needs more

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # type: ignore[misc, valid-type]
    """The safe loader with implicit-tag resolution memoized: claims repeat the same keys and
    values thousands of times, and resolution is pure in (kind, value, implicit)."""

    _memo: dict = {}

    def resolve(self, kind, value, implicit):
        key = (kind, value, implicit)
        try:
            return self._memo[key]
        except (KeyError, TypeError):
            tag = super().resolve(kind, value, implicit)
            if len(self._memo) < 200_000:
                try:
                    self._memo[key] = tag
                except TypeError:
                    pass
            return tag
_STANDARD_TAGS = {
    "tag:yaml.org,2002:" + t
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp")
}
KeyPath = tuple


@dataclass
class Document:
    """A parsed YAML mapping and the line (1-based) of every key path in it."""

    path: str
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)

    def line_of(self, keypath: KeyPath) -> int:
        """The line of the deepest existing prefix of ``keypath``; 1 when none exists."""
        kp = tuple(keypath)
        while kp:
            if kp in self.lines:
                return self.lines[kp]
            kp = kp[:-1]
        return 1


class YamlRejected(Exception):
    def __init__(self, problem: Problem):
        super().__init__(str(problem))
        self.problem = problem


def load_document(path: str | Path, *, display: str | None = None) -> Document:
    """Read ``path`` strictly; raise ``YamlRejected`` with a located problem."""
    shown = display or str(path)
    try:  # the one bounded reader: a claim linked to /dev/zero took `site` to 24 GB (an adversarial review)
        raw = read_bytes(path, limit=MAX_BYTES, what="claim")
    except UnreadableFile as e:
        why = str(e).removeprefix(f"{path}: ")
        raise YamlRejected(Problem(shown, 1, "file", f"{why} (a claim is a short description, at most 1 MiB)")) from None
    return parse_document(raw, shown)


def parse_document(raw: bytes, shown: str) -> Document:
    if len(raw) > MAX_BYTES:
        raise YamlRejected(Problem(shown, 1, "file", "text is over the 1 MiB limit for a claim"))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise YamlRejected(Problem(
            shown, line, "file",
            f"text is not UTF-8 (byte 0x{raw[e.start]:02x} at offset {e.start}); save the file as UTF-8")) from None
    if text.startswith("\ufeff"):
        text = text[1:]
    try:
        if "&" in text:  # no anchor without `&`; a lone alias then fails compose as undefined
            _refuse_anchors(text, shown)
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        what = e.problem or e.context or "invalid YAML"
        raise YamlRejected(Problem(shown, line, "yaml", f"syntax error at column {col}: {what}")) from None
    except yaml.YAMLError as e:
        raise YamlRejected(Problem(shown, 1, "yaml", f"syntax error: {e}")) from None
    if node is None:
        raise YamlRejected(Problem(shown, 1, "document", "the file is empty; a claim is a YAML mapping"))
    if not isinstance(node, yaml.MappingNode):
        raise YamlRejected(Problem(
            shown, node.start_mark.line + 1, "document",
            "the document is not a mapping; a claim is `key: value` pairs at the top level"))
    doc = Document(shown, None)
    _check_depth(node, doc)
    doc.data = _build(node, (), doc)
    return doc


def _check_depth(root: yaml.Node, doc: Document) -> None:
    """Refuse a document nested deeper than MAX_DEPTH, walking it without recursion."""
    stack = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise YamlRejected(Problem(doc.path, node.start_mark.line + 1, "yaml",
                                       f"values nested more than {MAX_DEPTH} levels deep; a claim is a few "
                                       "levels of keys and lists"))
        if isinstance(node, yaml.MappingNode):
            stack.extend((v, depth + 1) for _, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((v, depth + 1) for v in node.value)


def _refuse_anchors(text: str, shown: str) -> None:
    """Refuse anchors and aliases from the event stream, before any node could be expanded."""
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, yaml.AliasEvent) or getattr(ev, "anchor", None):
            name = getattr(ev, "anchor", "")
            raise YamlRejected(Problem(
                shown, (ev.start_mark.line + 1) if ev.start_mark is not None else 1, "yaml",
                f"anchors and aliases (&{name} / *{name}) are not allowed in claims; write the value out"))


def _build(node: yaml.Node, kp: KeyPath, doc: Document) -> Any:
    if node.tag not in _STANDARD_TAGS:
        raise YamlRejected(Problem(
            doc.path, node.start_mark.line + 1, _dotted(kp) or "yaml",
            f"tag {node.tag!r} is not allowed; use plain YAML values"))
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode):
                raise YamlRejected(Problem(doc.path, knode.start_mark.line + 1, _dotted(kp) or "yaml",
                                           "mapping keys must be plain strings"))
            key = str(_scalar(knode, kp, doc))
            sub = kp + (key,)
            if key in out:
                raise YamlRejected(Problem(
                    doc.path, knode.start_mark.line + 1, _dotted(sub),
                    f"duplicate key (first at line {doc.lines[sub]}); YAML parsers disagree on which wins, keep one"))
            doc.lines[sub] = knode.start_mark.line + 1
            out[key] = _build(vnode, sub, doc)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            doc.lines[kp + (i,)] = item.start_mark.line + 1
            items.append(_build(item, kp + (i,), doc))
        return items
    if not isinstance(node, yaml.ScalarNode):  # the composer makes only these three kinds
        raise YamlRejected(Problem(doc.path, node.start_mark.line + 1, _dotted(kp) or "yaml",
                                   f"unexpected YAML node {type(node).__name__}"))
    return _scalar(node, kp, doc)


_constructor = yaml.constructor.SafeConstructor()


_IMMUTABLE = {"tag:yaml.org,2002:" + t for t in ("str", "int", "float", "bool", "null")}
_NUMBERS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
_scalars: dict = {}


def _scalar(node: yaml.ScalarNode, kp: KeyPath, doc: Document) -> Any:
    if node.tag == "tag:yaml.org,2002:str":
        return node.value
    key = (node.tag, node.value)
    if key in _scalars:
        return _scalars[key]
    where = (doc.path, node.start_mark.line + 1, _dotted(kp) or "yaml")
    if node.tag in _NUMBERS and len(node.value) > MAX_NUMBER_CHARS:
        raise YamlRejected(Problem(*where, f"a number of {len(node.value)} characters; claims hold sizes and "
                                           f"rates of at most {MAX_NUMBER_CHARS} characters"))
    try:
        value = _constructor.construct_object(node, deep=True)
    except yaml.YAMLError as e:
        raise YamlRejected(Problem(*where, str(e))) from None
    except (ValueError, OverflowError) as e:  # e.g. a date YAML reads as a timestamp, out of range
        raise YamlRejected(Problem(*where, f"cannot be read as {node.tag.rsplit(':', 1)[-1]}: {e}")) from None
    if (why := _unwritable(value)) is not None:
        raise YamlRejected(Problem(*where, why))
    if node.tag in _IMMUTABLE and len(_scalars) < 100_000:
        _scalars[key] = value
    return value


def _unwritable(value: Any) -> str | None:
    """Why a number cannot travel into a record as itself, or None. A record copies its claim, and
    JSON writers refuse an integer past 64 bits (a traceback in audit and publish) and write NaN and
    infinity as null (so a copy and its claim would hash alike while saying different things)."""
    if type(value) is int and not -(1 << 63) <= value < (1 << 64):
        return f"{value} is an integer past 64 bits; a claim's numbers must fit what JSON tools and kernels read"
    if type(value) is float and not math.isfinite(value):
        return f"{value} is not a finite number; a claim's numbers must be finite"
    return None


def _dotted(kp: KeyPath) -> str:
    out = ""
    for k in kp:
        out += f"[{k}]" if isinstance(k, int) else (f".{k}" if out else str(k))
    return out


dotted = _dotted
