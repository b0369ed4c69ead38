"""What the static rules need to know of one source file, computed once per content and kept.

`check` on the shipped claims parsed and walked the same 43 kernel files on every call: about
40% of its time (py-spy), the rest being the rules themselves and the imports. What the rules
read of a file (its imports, aliases, top-level names, the references in each function, the
module-wide findings) depends only on the file's bytes and on the rules' own code, so it is
kept in the user's cache folder, keyed by the file's sha256 under a fingerprint of that code: a
changed file, or changed rules, is read afresh.

Trust: the cache is written by claimbench's own processes only. A claim's code runs confined
(Landlock or bwrap: it may write its scratch folder alone), so it cannot plant facts; without a
sandbox it could, but it could then also rewrite claimbench itself. An entry of the wrong shape
is dropped and its file read again, never trusted. And the static rules are a first filter: the
dispatch trace and the process design decide what a kernel did (rules.py).

Within a process, facts are also remembered by (path, size, mtime), as the rules always were:
10,000 claims sharing a kernel file read it once.
"""

from __future__ import annotations

import ast
import atexit
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from claimbench.spec.bounded import UnreadableFile, read_bytes
from claimbench.store.cachefile import load_json_cache, save_cache, user_cache_dir
from claimbench.store.codeprint import code_fingerprint

# The code that computes a file's facts: the cache is keyed by its source (tests/store/test_codeprint.py
# holds it to what these modules import).
_CODE = ("claimbench.gate.facts", "claimbench.gate.rules", "claimbench.gate.srcgraph", "claimbench.spec.ops",
         "claimbench.spec.claim", "claimbench.spec.draft07", "claimbench.spec.problem", "claimbench.spec.bounded",
         "claimbench.store.cachefile", "claimbench.store.codeprint", "claimbench.store.jsonio", "claimbench.errors")
MAX_ENTRIES = 1024  # files kept, about 6 KB each as JSON; the least recently used go first


@dataclass(frozen=True)
class Facts:
    top_names: frozenset[str]       # functions, classes, assignments and imports at top level
    aliases: dict[str, str]         # rules.aliases: local name -> the dotted name it stands for
    module: tuple                   # rules' module-wide findings: (kind, line, a, b)
    functions: dict[str, tuple]     # top-level function -> (refs, local calls, imported calls)
    imports: tuple                  # ("import", line, 0, None, names) / ("from", line, level, module, names)
    strings: tuple[str, ...]        # string literals naming CUDA or C++ files


_BY_STAT: dict[tuple[str, int, int], Facts] = {}
_STORE: Optional[dict] = None   # sha256 -> facts as JSON, loaded at the first file not seen in this process
_NEW: dict[str, Any] = {}       # computed here, written at exit
_USED: set[str] = set()         # read from the store here: kept ahead of the others when it is trimmed
_REGISTERED = False


def facts(path: Path) -> Facts:
    """The file's facts; raises OSError, UnicodeDecodeError or SyntaxError as reading and parsing it would."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    got = _BY_STAT.get(key)
    if got is not None:
        return got
    try:
        raw = read_bytes(path, what="source file")  # bounded: a 2 GiB or endless file is one line, not a hang
    except UnreadableFile as e:
        raise OSError(str(e)) from None
    sha = hashlib.sha256(raw).hexdigest()
    got = _from_store(sha)
    if got is None:
        got = _compute(path, raw.decode("utf-8"))
        _remember(sha, got)
    if len(_BY_STAT) > 4096:
        _BY_STAT.clear()
    _BY_STAT[key] = got
    return got


def _compute(path: Path, text: str) -> Facts:
    from claimbench.gate import rules, srcgraph

    tree = ast.parse(text, filename=str(path))
    every = tuple(srcgraph.walk(tree))
    al = rules.aliases(every)
    return Facts(top_names=frozenset(srcgraph.top_level_names(tree)), aliases=al,
                 module=rules.module_facts_of(tree, every, al), functions=rules.functions_of(tree, al),
                 imports=srcgraph.import_records(every), strings=srcgraph.cu_strings(every))


def _cache_file() -> Path:
    return user_cache_dir() / f"gate-facts-{code_fingerprint(_CODE)}.json"


def _from_store(sha: str) -> Optional[Facts]:
    global _STORE
    if _STORE is None:
        _STORE = load_json_cache(_cache_file())
    entry = _STORE.get(sha)
    if entry is None:
        return None
    _USED.add(sha)
    try:
        return _decode(entry)
    except (TypeError, ValueError, KeyError):  # not what this code writes: read the file again
        return None


def _at_exit() -> None:
    global _REGISTERED
    if not _REGISTERED:
        atexit.register(_save)
        _REGISTERED = True


def _remember(sha: str, f: Facts) -> None:
    _at_exit()
    _NEW[sha] = {"top_names": sorted(f.top_names), "aliases": f.aliases, "module": f.module,
                 "functions": f.functions, "imports": f.imports, "strings": f.strings}


def take_new() -> dict[str, Any]:
    """The facts computed in this process and not yet written, handed over (a forked worker's)."""
    new = dict(_NEW)
    _NEW.clear()
    return new


def keep(new: dict[str, Any]) -> None:
    """Facts another process computed, to be written with this one's at exit."""
    if new:
        _at_exit()
        _NEW.update(new)


def _save() -> None:
    """Merge this process's new facts into the cache file (a read-only or full folder skips it)."""
    if not _NEW:
        return
    path = _cache_file()
    old = load_json_cache(path)  # another process may have added its own meanwhile
    merged = {k: v for k, v in old.items() if k not in _USED}
    merged.update((k, old[k]) for k in _USED if k in old)  # the last, the most recently used
    merged.update(_NEW)
    if len(merged) > MAX_ENTRIES:
        merged = dict(list(merged.items())[-MAX_ENTRIES:])
    save_cache(path, merged, "gate-facts-*.json")
    _NEW.clear()


def _strs(x: Any) -> tuple[str, ...]:
    if not isinstance(x, list) or not all(isinstance(v, str) for v in x):
        raise TypeError("expected a list of strings")
    return tuple(x)


def _line(x: Any) -> int:
    if not isinstance(x, int) or isinstance(x, bool):
        raise TypeError("expected a line number")
    return x


def _opt_str(x: Any) -> Optional[str]:
    if x is not None and not isinstance(x, str):
        raise TypeError("expected a string or null")
    return x


def _decode(d: Any) -> Facts:
    """Facts from their JSON form, every field checked for the shape the rules read."""
    if not isinstance(d, dict) or not isinstance(d["aliases"], dict):
        raise TypeError("expected an object")
    aliases = {k: v for k, v in d["aliases"].items() if isinstance(v, str)}
    if len(aliases) != len(d["aliases"]):
        raise TypeError("alias values must be strings")
    module = []
    for kind, line, a, b in d["module"]:
        if kind not in ("fixed", "assign", "global"):
            raise ValueError(kind)
        module.append((kind, _line(line), _strs(a) if kind == "global" else _opt_str(a) or "", _opt_str(b)))
    functions: dict[str, tuple] = {}
    for name, (refs, local, imported) in d["functions"].items():
        checked = []
        for kind, line, value, extra in refs:
            if kind not in ("dyn", "str", "attr", "name") or not isinstance(value, str) \
                    or not (extra is None or isinstance(extra, (bool, str))):
                raise ValueError(kind)
            checked.append((kind, _line(line), value, extra))
        functions[name] = (tuple(checked), _strs(local), _strs(imported))
    imports = []
    for kind, line, level, module_name, names in d["imports"]:
        if kind not in ("import", "from") or not isinstance(level, int):
            raise ValueError(kind)
        imports.append((kind, _line(line), level, _opt_str(module_name), _strs(names)))
    return Facts(top_names=frozenset(_strs(d["top_names"])), aliases=aliases, module=tuple(module),
                 functions=functions, imports=tuple(imports), strings=_strs(d["strings"]))
