"""The README's command table, generated from the parser, so the two cannot drift apart.

`python -m claimbench.clidoc` prints the table; `--write README.md` replaces the block between
the `commands` markers. The exit codes are data here because argparse cannot know them;
`tests/test_clidoc.py` provokes each one and compares. A command listed here but not registered
(another branch's) is left out of the table.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

BEGIN, END = "<!-- commands:begin -->", "<!-- commands:end -->"

EXIT_CODES: dict[str, tuple[tuple[int, str], ...]] = {
    "new": ((0, "files written"), (2, "bad id or entry, or a file exists")),
    "check": ((0, "all pass"), (1, "any rejected"), (2, "usage, or nothing found")),
    "list": ((0, "listed"), (2, "usage, or no claim files")),
    "show": ((0, "the claim passes check"), (1, "it is rejected"), (2, "usage, or no such claim")),
    "schema": ((0, "written"), (2, "usage")),
    "run": ((0, "every claim verified, or skipped for hardware"), (1, "any other verdict"), (2, "usage")),
    "ingest": ((0, "every record good or already present"), (1, "any refused"), (2, "usage")),
    "reproduce": ((0, "same verdict, and overlapping intervals on the same machine"), (1, "anything else"), (2, "usage")),
    "publish": ((0, "list written or unchanged, nothing refused or taken off"),
                (1, "a record refused, a number taken off, committed evidence changed, or the list malformed"),
                (2, "usage")),
    "audit": ((0, "nothing wrong"), (1, "any problem"), (2, "usage")),
    "table": ((0, "printed"), (2, "usage")),
    "compare": ((0, "no claim slower, gone or refused"), (1, "any SLOWER, MISSING or REFUSED"), (2, "usage")),
    "site": ((0, "written"), (1, "the list is malformed"), (2, "usage, or an output folder holding project data")),
}


def subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    """name -> (one-line help, its parser), in the parser's order."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    return {name: (helps.get(name, ""), p) for name, p in sub.choices.items()}


def metavar(action: argparse.Action) -> str | tuple[str, ...]:
    """One placeholder per kind of value, the same in `--help` and the README (`--results DIR`
    everywhere, never `RESULTS` in one command and `DIR` in another)."""
    if action.metavar is not None:
        return action.metavar
    return ("N" if action.type is int else "S" if action.type is float
            else "DIR" if action.dest in ("results", "out") else "PATH" if action.dest.endswith("path")
            else action.dest.upper())


def finish(parser: argparse.ArgumentParser) -> None:
    """Give every command's `--help` a description (its one-line help when it has none), its exit
    codes (from EXIT_CODES, the table the README shows) and the README's placeholders."""
    for name, (help_text, p) in subcommands(parser).items():
        p.description = p.description or (help_text[:1].upper() + help_text[1:] + "." if help_text else None)
        codes = "; ".join(f"{c} {why}" for c, why in EXIT_CODES.get(name, ()))
        p.epilog = f"exit codes: {codes}" if codes else p.epilog
        for a in p._actions:
            if a.option_strings and a.nargs != 0 and not a.choices and a.metavar is None:
                a.metavar = metavar(a)


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
