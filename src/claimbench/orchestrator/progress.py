"""How a run shows its progress: one live line on a terminal (rich), plain lines otherwise.

Work that takes long (measuring ceilings, correctness trials, timing rounds) reports as it goes.
On a terminal the latest line of each claim replaces the last; in a log or CI, every phase change
is a line with its time, and repeated timing rounds at most one every 2 s.
"""

from __future__ import annotations

import sys
import time
from typing import Callable


class PlainProgress:
    """Progress as lines with the time since ``t0`` (logs, CI); timing-round and ceilings lines at
    most one every 2 s."""

    def __init__(self, t0: float, stream=None) -> None:
        self.t0, self.last_round, self.stream = t0, 0.0, stream or sys.stderr

    def __call__(self, msg: str) -> None:
        now = time.monotonic()
        if ": timing: round" in msg or ": ceilings: " in msg:
            if now - self.last_round < 2.0:
                return
            self.last_round = now
        print(f"[{now - self.t0:7.1f}s] {_printable(msg)}", file=self.stream, flush=True)

    def close(self) -> None:
        """Nothing to stop: every line is printed already."""
        pass


class RichProgress:
    """A status line under rich's control; finished claims stay printed above it."""

    def __init__(self, t0: float) -> None:
        from rich.console import Console

        self.t0 = t0
        self.console = Console(stderr=True, highlight=False)
        self.status = self.console.status("starting", spinner="dots")
        self.status.start()
        self.current = ""

    def __call__(self, msg: str) -> None:
        claim = msg.split(":", 1)[0]
        if claim != self.current and self.current:
            self.console.print(f"[dim]{time.monotonic() - self.t0:7.1f}s[/dim] {self.current}: done", markup=True)
        self.current = claim
        from rich.markup import escape
        self.status.update(escape(f"{time.monotonic() - self.t0:6.1f}s  {_printable(msg)}"))

    def close(self) -> None:
        """Stop the live status line at the end of the command."""
        self.status.stop()


def _printable(msg: str) -> str:
    """Claim ids and paths reach the terminal: no control or escape characters."""
    return "".join(ch if ch.isprintable() else "?" for ch in msg)


def make(t0: float, quiet: bool) -> Callable[[str], None]:
    """The ``say`` callback of a run: silent when ``quiet``, a live rich line on a terminal, plain lines
    otherwise."""
    if quiet:
        return lambda msg: None
    if sys.stderr.isatty():
        try:
            return RichProgress(t0)
        except ImportError:  # rich is optional: plain lines do
            pass
    return PlainProgress(t0)
