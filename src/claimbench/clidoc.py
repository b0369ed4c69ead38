"""The README's command table, generated from the parser, so the two cannot drift apart.

`python -m claimbench.clidoc` prints the table; `--write README.md` replaces the block between
the `commands` markers. The exit codes and placeholders are `helptext`'s, the data every
command's `--help` shows too; `tests/test_clidoc.py` provokes each exit code and compares. A
command listed there but not registered (another branch's) is left out of the table.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from claimbench.helptext import EXIT_CODES, metavar, subcommands

BEGIN, END = "<!-- commands:begin -->", "<!-- commands:end -->"

__all__ = ["BEGIN", "END", "EXIT_CODES", "subcommands", "table", "replace_block"]

def _invocation(action: argparse.Action) -> str:
    """`--flag VALUE` as a reader types it."""
    flag = max(action.option_strings, key=len)
    if action.nargs == 0:
        return flag
    if action.choices:
        return f"{flag} {'|'.join(map(str, action.choices))}"
    mv = metavar(action)
    return f"{flag} {' '.join(mv) if isinstance(mv, tuple) else mv}"


def _positionals(p: argparse.ArgumentParser) -> str:
    out = []
    for a in p._actions:
        if a.option_strings or isinstance(a, argparse._SubParsersAction):
            continue
        name = a.metavar or a.dest.upper()
        name = " ".join(name) if isinstance(name, tuple) else name  # argparse's own rendering of a tuple
        out.append(f"[{name}...]" if a.nargs == "*" else f"[{name}]" if a.nargs == "?" else name)
    return " ".join(out)


def table(parser: argparse.ArgumentParser) -> str:
    rows = ["| command | what it does; options | exit |", "|---|---|---|"]
    for name, (help_text, p) in subcommands(parser).items():
        opts = [f"`{_invocation(a)}`" for a in p._actions
                if a.option_strings and not isinstance(a, argparse._HelpAction) and a.help != argparse.SUPPRESS]
        what = help_text + (f"; {', '.join(opts)}" if opts else "")
        codes = "; ".join(f"{c} {why}" for c, why in EXIT_CODES.get(name, ()))
        usage = f"claimbench {name} {_positionals(p)}".strip()
        rows.append(f"| `{usage}` | {what.replace('|', chr(92) + '|')} | {codes} |")
    return "\n".join(rows)


def replace_block(text: str, block: str) -> str:
    pattern = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"no {BEGIN} ... {END} block")
    return pattern.sub(lambda m: f"{BEGIN}\n{block}\n{END}", text, count=1)


def main(argv: list[str] | None = None) -> int:
    from claimbench.cli import build_parser

    args = argv if argv is not None else sys.argv[1:]
    block = table(build_parser())
    if args[:1] == ["--write"] and len(args) == 2:
        path = Path(args[1])
        path.write_text(replace_block(path.read_text(encoding="utf-8"), block), encoding="utf-8")
        return 0
    if args:
        print("usage: python -m claimbench.clidoc [--write README.md]", file=sys.stderr)
        return 2
    print(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
