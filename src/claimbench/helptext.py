"""What every command's `--help` says beyond its options: a description, its exit codes, and the
same placeholders the README's command table uses (`clidoc` renders that table from this data), so
`--help`, the README and what the commands do cannot tell three stories.

The exit codes are data here because argparse cannot know them; `tests/test_clidoc.py` provokes
each one and compares. This module sits below the CLI (which calls `finish` on its parser) and
above nothing: `clidoc`, the README's generator, imports it too.
"""

from __future__ import annotations

import argparse

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
