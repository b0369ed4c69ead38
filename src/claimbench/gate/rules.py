"""Static rules on a kernel's source, read with ``ast`` before anything runs.

They catch the cheats that are visible in the text: calling the baseline, calling a forbidden
op, patching timers, torch or the harness, reaching the interpreter through ``gc``, ``ctypes``,
tracers or frames, and starting, signalling or detaching processes. They are a first filter that
gives a good message early; the guarantee is the process design (the judge, the clock and the
records live where claim code cannot reach), and the dispatch trace in side/trace.py records what
the text hides.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path
from typing import Optional, Union

from claimbench.gate.facts import facts
from claimbench.gate.srcgraph import children, closure, module_file, split_ref, walk
from claimbench.gate.srcgraph import resolved as real_path
from claimbench.spec import ops
from claimbench.spec.claim import Claim
from claimbench.spec.problem import Problem

BANNED_MODULES = {"gc", "ctypes", "inspect", "importlib", "builtins", "cffi", "_ctypes", "claimbench",
                  "subprocess", "multiprocessing", "signal", "pty", "psutil", "traceback", "_thread"}
BANNED_CALLS = {"__import__", "eval", "exec", "compile", "globals", "vars", "setattr", "delattr"}
BANNED_ATTRS = {("sys", "modules"), ("sys", "_getframe"), ("sys", "settrace"), ("sys", "setprofile"),
                ("sys", "gettrace"), ("sys", "getprofile"), ("sys", "_current_frames"), ("sys", "exc_info"),
                ("sys", "exception"), ("threading", "settrace"), ("threading", "setprofile"),
                ("threading", "gettrace"), ("threading", "getprofile")}
# process control: a kernel has no business starting, signalling, renicing or pinning processes
BANNED_OS = {"kill", "killpg", "getppid", "fork", "forkpty", "setsid", "setpgid", "setpgrp", "system", "popen",
             "sched_setaffinity", "setpriority", "nice", "utime", "posix_spawn", "posix_spawnp", "pidfd_open",
             "execv", "execve", "execl", "execle", "execlp", "execlpe", "execvp", "execvpe",
             "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv", "spawnve", "spawnvp", "spawnvpe"}
FRAME_ATTRS = ("__globals__", "__code__", "f_back", "f_locals", "f_globals", "f_code", "tb_frame", "gi_frame",
               "cr_frame", "ag_frame", "__builtins__", "__subclasses__", "__dict__")
PROTECTED_ROOTS = ("time", "torch", "triton", "numpy", "cupy", "claimbench")
# Watching the watcher: what would let a kernel tell a traced or checked call from a timed one. A
# kernel has no use for a clock, for the state of torch's dispatch and function modes, or for the
# profiler; and a name built at run time (`getattr(torch, "soft" + "max")`) hides from every rule
# here, so attribute lookups must name their attribute.
CLOCK_MODULES = {"time", "timeit", "datetime", "resource"}
CLOCK_OS = {"times", "clock_gettime", "clock_gettime_ns", "getloadavg", "wait3", "wait4"}
OBSERVER_WORDS = ("dispatch_mode", "function_mode", "dispatch_stack", "function_stack", "torch_dispatch",
                  "torch_function", "profiler", "_python_dispatch", "elapsed_time", "_tls", "tracing_state",
                  # the ways around the tripwire on forbidden ops (side/tripwire.py sits at the autograd
                  # dispatch keys): inference mode and the guards that skip those keys, the registrations
                  "inference_mode", "InferenceMode", "AutoDispatchBelow", "ExcludeDispatchKey", "torch.library",
                  "_dispatch_")
DYNAMIC_LOOKUP = {"getattr", "hasattr"}
DYNAMIC_ATTRS = {"__getattribute__", "__getattr__", "attrgetter", "methodcaller"}


def aliases(every: tuple[ast.AST, ...]) -> dict[str, str]:
    """Local name -> dotted module or object it stands for, from every node of a module: imports,
    and plain assignments of those (`_T = torch`, `F = torch.nn.functional`, chains of them), so
    `_T.softmax = ...` is seen as an assignment to `torch.softmax`."""
    out: dict[str, str] = {}
    assigns: list[tuple[str, ast.AST]] = []
    for node in every:
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, (ast.Name, ast.Attribute)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            assigns += [(t.id, node.value) for t in targets if isinstance(t, ast.Name)]
        elif isinstance(node, ast.NamedExpr) and isinstance(node.value, (ast.Name, ast.Attribute)):
            assigns.append((node.target.id, node.value))
    for _ in range(4):  # chains of aliases settle in a few passes
        grew = False
        for name, value in assigns:
            d = dotted(value, out)
            if d and d.split(".")[0] in PROTECTED_ROOTS and out.get(name) != d:
                out[name] = d
                grew = True
        if not grew:
            break
    return out


def dotted(node: ast.AST, al: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(al.get(node.id, node.id))
    return ".".join(reversed(parts))


def _line(node: ast.AST) -> int:
    """An import or assignment's line: statements have one, and the walk gives only statements here."""
    return int(getattr(node, "lineno", 0))


def _functions(tree: ast.Module) -> dict[str, Union[ast.FunctionDef, ast.AsyncFunctionDef]]:
    return {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def reachable(root: Path, path: Path, func: str) -> list[tuple[Path, tuple]]:
    """(file, references) of every function body reachable from ``path:func`` by name, across
    project modules. References are read once per function version and cached."""
    out, seen = [], set()
    todo = [(real_path(path), func)]
    while todo:
        p, name = todo.pop()
        if (p, name) in seen or not p.is_file():
            continue
        seen.add((p, name))
        info = facts(p).functions.get(name)
        if info is None:
            continue
        refs, local, imported = info
        out.append((p, refs))
        todo.extend((p, n) for n in local)
        for dotted_name in imported:
            mod, _, attr = dotted_name.rpartition(".")
            f = module_file(root, mod) if mod else None
            if f is not None:
                todo.append((real_path(f), attr))
    return out


def functions_of(tree: ast.Module, al: dict[str, str]) -> dict[str, tuple]:
    """Each top-level function's references: ("str", line, value), ("attr", line, dotted, resolved),
    ("name", line, id, alias-or-None), ("dyn", line, message, None); and the local and imported
    functions it names. Kept per file content (gate/facts.py); `reachable` reads them by name."""
    funcs = _functions(tree)
    out: dict[str, tuple] = {}
    for name, node in funcs.items():
        refs: list[tuple[str, int, str, Union[bool, str, None]]] = []
        local, imported = [], []
        every = walk(node)  # once: the body's lookups are read from the same list (a third of a cold `check`'s walks)
        head = {id(n) for part in _non_body(node) for n in walk(part)}
        refs.extend(("dyn", line, msg, None) for line, msg in _lookups_in([n for n in every[1:] if id(n) not in head]))
        for sub in every:
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                refs.append(("str", sub.lineno, sub.value, False))
            elif isinstance(sub, ast.Attribute):
                root_name = _root(sub)
                refs.append(("attr", sub.lineno, dotted(sub, al) or sub.attr, root_name is not None and root_name in al))
            elif isinstance(sub, ast.Name):
                refs.append(("name", sub.lineno, sub.id, al.get(sub.id)))
                if sub.id in funcs:
                    local.append(sub.id)
                elif sub.id in al:
                    imported.append(al[sub.id])
        out[name] = (tuple(refs), tuple(local), tuple(imported))
    return out


@lru_cache(maxsize=65536)
def _forbidden_hit(name: str, forbidden: tuple[str, ...], resolved: bool) -> str | None:
    """A resolved name (rooted at an import) hits when it is the forbidden name or, rooted at torch,
    reaches the same op under another spelling (`torch.special.softmax`, `torch.ops.aten._softmax`:
    spec/ops.py); an attribute on a local value (``x.softmax()``) matches on its op, since a tensor
    method is the same op."""
    for f in forbidden:
        if name == f:
            return f
        if (not resolved or name.split(".")[0] == "torch") and ops.same_op(name, f):
            return f
    return None


# the node types _module_facts has a rule for; the rest (constants, operators, literals) it skips
_READ = (ast.Import, ast.ImportFrom, ast.Call, ast.Attribute, ast.Name, ast.Assign, ast.Delete, ast.AugAssign,
         ast.AnnAssign, ast.Global)


def module_facts(path: Path) -> tuple:
    """The claim-independent findings of one module's walk, kept per file content (gate/facts.py;
    10,000 claims sharing a kernel file walk it once): ("fixed", line, message, None) problems, and
    ("assign", line, dotted, attr) / ("global", line, names, None) that depend on the claim."""
    return facts(path).module


def module_facts_of(tree: ast.Module, every: tuple[ast.AST, ...], al: dict[str, str]) -> tuple:
    """`module_facts` from the module's tree, every node of it (walk order) and its aliases."""
    out: list[tuple] = []
    for node in every:
        if not isinstance(node, _READ):
            continue
        mods = []
        if isinstance(node, ast.Import):
            mods = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            mods = [node.module.split(".")[0]]
        for m in mods:
            if m in BANNED_MODULES:
                out.append(("fixed", _line(node), f"imports `{m}`, which can reach the harness, the interpreter or other "
                            "processes; kernels may not use it", None))
            if m in CLOCK_MODULES:
                out.append(("fixed", _line(node), f"imports `{m}`, a clock: a kernel that can time itself can tell the "
                            "checked calls from the timed ones; kernels may not read clocks", None))
        full = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if isinstance(node, ast.ImportFrom) and node.module else [])
        for name in full:
            if _observer(name):
                out.append(("fixed", _line(node), f"imports `{name}`, which tells whether the harness is watching; "
                            "kernels may not", None))
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            for a in node.names:
                if a.name in BANNED_OS:
                    out.append(("fixed", node.lineno, f"imports `os.{a.name}`: kernels may not start, signal, renice "
                                "or pin processes, or change file times", None))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in BANNED_CALLS:
            out.append(("fixed", node.lineno, f"calls `{node.func.id}()`, which hides what the kernel touches; write the call out", None))
        if isinstance(node, ast.Attribute):
            d = dotted(node, al) or ""
            if any(d == f"{a}.{b}" or d.startswith(f"{a}.{b}.") for a, b in BANNED_ATTRS):
                out.append(("fixed", node.lineno, f"uses `{d}`, which reaches into the interpreter's state; kernels may not", None))
            if d.split(".")[:1] == ["os"] and node.attr in BANNED_OS:
                out.append(("fixed", node.lineno, f"uses `{d}`: kernels may not start, signal, renice or pin "
                            "processes, or change file times", None))
            if d.split(".")[:1] == ["os"] and node.attr in CLOCK_OS:
                out.append(("fixed", node.lineno, f"uses `{d}`, a clock; kernels may not read clocks", None))
            if _observer(node.attr):
                out.append(("fixed", node.lineno, f"uses `{d or node.attr}`, which tells whether the harness is "
                            "watching; kernels may not", None))
            if node.attr in DYNAMIC_ATTRS:
                out.append(("fixed", node.lineno, f"uses `.{node.attr}`, an attribute lookup by a computed name; "
                            "write the attribute out", None))
            if node.attr in FRAME_ATTRS:
                out.append(("fixed", node.lineno, f"uses `.{node.attr}`, which reaches into the interpreter's state; kernels may not", None))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_LOOKUP:
            lit = _literal_name(node)
            if lit is not None and (lit in FRAME_ATTRS or lit in BANNED_OS or lit in CLOCK_OS or _observer(lit)
                                    or lit in DYNAMIC_ATTRS or any(lit == b for _, b in BANNED_ATTRS)):
                out.append(("fixed", node.lineno, f"looks up `{lit}` by name, which the rules refuse as an "
                            "attribute; kernels may not", None))
        if isinstance(node, ast.Name) and node.id in ("__builtins__", "__loader__", "__spec__"):
            out.append(("fixed", node.lineno, f"uses `{node.id}`, which reaches around the import rules; kernels may not", None))
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Attribute):
                out.append(("assign", _line(node), dotted(t.value, al) or "", t.attr))
        if isinstance(node, ast.Global):
            out.append(("global", node.lineno, tuple(node.names), None))
    out.extend(("fixed", line, msg, None) for line, msg in _dynamic_lookups(tree.body))
    return tuple(out)


def _observer(name: str) -> bool:
    return any(w in name for w in OBSERVER_WORDS)


def _literal_name(call: ast.Call) -> str | None:
    """The attribute a getattr/hasattr call names, when it is written out as a string."""
    if len(call.args) >= 2 and isinstance(call.args[1], ast.Constant) and isinstance(call.args[1].value, str):
        return call.args[1].value
    return None


def _dynamic_lookups(body: list) -> list[tuple[int, str]]:
    """`getattr`/`hasattr` with a computed name, or passed around as a value, in a module's statements
    outside its functions. A module's own functions are judged when the kernel can reach them (a task's
    `inputs` may look up `getattr(torch, dtype)`: `functions_of`); a kernel function's nested functions
    are part of it."""
    todo = list(body)
    nodes = []
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            todo.extend(node.decorator_list)
            todo.extend(node.args.defaults)
            continue
        nodes.append(node)
        todo.extend(children(node))
    return _lookups_in(nodes)


def _non_body(node: ast.AST) -> list[ast.AST]:
    """A function's child nodes outside its body: arguments, decorators, annotations."""
    out: list[ast.AST] = []
    for field in node._fields:
        v = getattr(node, field, None)
        if field != "body":
            out.extend(x for x in (v if isinstance(v, list) else [v]) if isinstance(x, ast.AST))
    return out


def _lookups_in(nodes: list) -> list[tuple[int, str]]:
    """`_dynamic_lookups` over nodes already gathered."""
    out, fine = [], set()
    for node in nodes:
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in DYNAMIC_LOOKUP:
            if _literal_name(node) is not None:
                fine.add(id(node.func))
    for node in nodes:
        if isinstance(node, ast.Name) and node.id in DYNAMIC_LOOKUP and id(node) not in fine:
            out.append((node.lineno, f"uses `{node.id}` with a computed name (or as a value), which hides what "
                        "the kernel touches; write the attribute out"))
    return out


def file_aliases(path: Path) -> dict[str, str]:
    """``aliases`` of a file, kept per file content; callers must not mutate the result."""
    return facts(path).aliases


def check_kernel_source(root: Path, claim: Claim, claim_path: str = "") -> list[Problem]:
    """Every static rule, located at the offending line of the kernel's source.

    Many claims share a kernel file, so the answer is memoized on what it depends on: the refs,
    the forbidden names, and the entry files' modification times."""
    refs = (claim.kernel.impl, claim.kernel.prepare, claim.baseline.impl)
    stamps: list[Optional[int]] = []
    for ref in refs:
        if ref:
            try:
                stamps.append((root / split_ref(ref)[0]).stat().st_mtime_ns)
            except OSError:
                stamps.append(None)
    key = (root, refs, tuple(claim.correctness.forbidden), tuple(stamps))
    if key not in _MEMO:
        if len(_MEMO) > 4096:
            _MEMO.clear()
        _MEMO[key] = tuple(_check_kernel_source(root, claim))
    return list(_MEMO[key])


_MEMO: dict[tuple, tuple] = {}


def _check_kernel_source(root: Path, claim: Claim) -> list[Problem]:
    problems: list[Problem] = []
    kfile, kfunc = split_ref(claim.kernel.impl)
    bfile, bfunc = split_ref(claim.baseline.impl)
    kpath, bpath = real_path(root / kfile), real_path(root / bfile)
    starts = [(kpath, kfunc, "kernel.impl")]
    if claim.kernel.prepare:
        pfile, pfunc = split_ref(claim.kernel.prepare)
        starts.append((real_path(root / pfile), pfunc, "kernel.prepare"))
    files = closure(root, {p for p, _, _ in starts if p.is_file()})

    def add(p: Path, line: int, key: str, *, msg: str) -> None:
        rel = p.relative_to(real_path(root)) if p.is_relative_to(real_path(root)) else p
        problems.append(Problem(str(rel), line, key, msg))

    bmod = ".".join(bpath.relative_to(real_path(root)).with_suffix("").parts) if bpath.is_relative_to(real_path(root)) else ""
    for f in sorted(files):
        if f.suffix != ".py":
            continue
        protected = set(PROTECTED_ROOTS) | ({bmod} if bmod and f != bpath else set())
        for kind, line, a, b in module_facts(f):
            if kind == "fixed":
                add(f, line, "kernel.impl", msg=a)
            elif kind == "assign" and (a.split(".")[0] in protected or a in protected):
                add(f, line, "kernel.impl", msg=f"assigns to `{a}.{b}`: patching {a} can slow the baseline or fake the timer")
            elif kind == "global" and f == bpath and bfunc in a:
                add(f, line, "kernel.impl", msg=f"rebinds the baseline function `{bfunc}`")
    forbidden = tuple(claim.correctness.forbidden)
    for start, func, key in starts:
        for p, refs in reachable(root, start, func):
            for kind, line, name, extra in refs:
                if kind == "dyn":
                    add(p, line, key, msg=name)
                    continue
                if kind == "str":
                    hit = _forbidden_hit(name, forbidden, resolved=False)
                    if hit and name == hit.split(".")[-1]:
                        add(p, line, key, msg=f"names forbidden `{hit}` in a string (a getattr call?); the kernel must not use it")
                    continue
                if kind == "attr":
                    resolved = extra
                else:
                    if p == bpath and name == bfunc:
                        add(p, line, key, msg=f"calls the baseline's own function `{bfunc}`; the kernel must compute the answer itself")
                        continue
                    if extra is None:
                        continue
                    name, resolved = extra, True
                if p != bpath and bmod and name == f"{bmod}.{bfunc}":
                    add(p, line, key, msg=f"calls the baseline's own function `{bfunc}`; the kernel must compute the answer itself")
                    continue
                hit = _forbidden_hit(name, forbidden, resolved)
                if hit:
                    add(p, line, key, msg=f"uses `{name}`, which the claim forbids (`{hit}`)")
    return _dedupe(problems)


def _root(node: ast.AST) -> str | None:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _dedupe(problems: list[Problem]) -> list[Problem]:
    seen, out = set(), []
    for p in problems:
        k = (p.path, p.line, p.message)
        if k not in seen:
            seen.add(k)
            out.append(p)
    return out
