"""One user-facing error type, as asv does: printed as one line, never a traceback.

Anything that is not a ``UserError`` is a bug in claimbench and keeps its traceback.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


class UserError(Exception):
    """A problem the user can fix. ``str(err)`` is the one line to print."""

    exit_code = EXIT_FAILED


class UsageError(UserError):
    """Wrong arguments, or nothing found to act on (exit 2)."""

    exit_code = EXIT_USAGE
