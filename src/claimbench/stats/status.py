"""The outcome of one claim: a status plus a reason, stored as data and never raised."""

from __future__ import annotations

from enum import Enum


class Status(str, Enum):
    VERIFIED = "verified"
    REFUTED = "refuted"
    INCONCLUSIVE = "inconclusive"
    INCORRECT = "incorrect"
    REJECTED = "rejected"
    SKIPPED = "skipped"
    ERROR = "error"
    TIMEOUT = "timeout"

    @property
    def ok(self) -> bool:
        """Exit 0 allows only verified and hardware skips."""
        return self in (Status.VERIFIED, Status.SKIPPED)

    @property
    def is_timing(self) -> bool:
        """Verdicts that come from timing alone; `--timing report` does not fail on them."""
        return self in (Status.VERIFIED, Status.REFUTED, Status.INCONCLUSIVE)
