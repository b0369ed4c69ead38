"""The command line: thin. Parse arguments, call one verb, map the outcome to an exit code.

Each subcommand lives in ``claimbench.commands.<name>`` with ``register(subparsers)`` and a
``run(args) -> int``; heavy imports stay inside ``run`` so ``check`` answers in well under a second.
A ``UserError`` prints one line and exits with its code; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys

from claimbench import __version__
from claimbench.errors import EXIT_USAGE, UserError
from claimbench.helptext import finish

COMMANDS = ("new", "check", "list", "show", "schema", "run", "ingest", "reproduce", "publish", "audit", "table", "compare", "site")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="claimbench",
        description="Executable performance claims: check, run, verify, publish.")
    parser.add_argument("--version", action="version", version=f"claimbench {__version__}")
    parser.add_argument("--root", default=None,
                        help="project root (the folder holding claims/ and kernels/); default: found from the paths or the cwd")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(f"claimbench.commands.{name}").register(sub)
    finish(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    fast = argv is None and getattr(args, "exit_fast", False)
    if fast:
        # Such a command's objects (a million for 100,000 records) are acyclic and live until the
        # exit below: each collection walks them all again for nothing (0.3 s of a warm audit's 5).
        gc.disable()
    try:
        code = int(args.func(args))
    except UserError as e:
        from claimbench.spec.safetext import terminal

        print(f"claimbench: {terminal(str(e))}", file=sys.stderr)  # paths and names from records: no escapes
        return e.exit_code
    except KeyboardInterrupt:
        print("claimbench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_gone()
    if fast:
        # A command that holds every record's summary ends here: its output is written and its
        # files are closed, and tearing down a million objects would take longer than the work.
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            return _reader_gone()
        sys.stderr.flush()
        os._exit(code)
    return code


def _reader_gone() -> int:
    """The reader of our output left (`claimbench publish | head -1`): what the command wrote to files is
    written; what it printed after that has no reader. Exit 1 without a traceback, as a shell's SIGPIPE
    would end it, and point stdout at /dev/null so Python's flush at exit does not raise again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 1


if __name__ == "__main__":
    sys.exit(main())
