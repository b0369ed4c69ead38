"""Which optional extra brings which package, and the one line a user sees when it is missing.

The core install (`pip install claimbench`) is what `check`, `list`, `show`, `publish` and `audit`
need: pyyaml, pydantic, numpy, orjson. Running claims, building the site and printing the table need
more, and a command that lacks it stops before doing anything, naming the extra to install.
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

from claimbench.errors import UserError

# extra -> the import names a command of that extra cannot start without
EXTRAS = {
    "run": ("torch",),            # also triton, nvidia-ml-py and rich, each optional at run time
    "cuda": ("cupy",),
    "site": ("jinja2", "matplotlib"),
    "table": ("pandas",),
}


def missing(extra: str) -> list[str]:
    return [m for m in EXTRAS[extra] if importlib.util.find_spec(m) is None]


def require(extra: str, what: str) -> None:
    """Raise the one-line error when `extra`'s packages are not installed."""
    lack = missing(extra)
    if lack:
        raise UserError(f"{what} needs {', '.join(lack)}, which comes with claimbench's [{extra}] extra: "
                        f"pip install 'claimbench[{extra}]' (in a checkout: pip install -e '.[{extra}]')")


def load(extra: str, module: str, what: str) -> ModuleType:
    """Import `module` from `extra`, or raise the one-line error (cheap once imported: table calls it per cell)."""
    mod = sys.modules.get(module)
    if mod is None:
        require(extra, what)
        mod = importlib.import_module(module)
    return mod
