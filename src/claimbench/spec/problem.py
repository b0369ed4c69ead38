"""A located problem: the one shape every rejection takes, so printers need not know its origin."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Problem:
    """What is wrong, where, and how to fix it."""

    path: str
    line: int
    key: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.key}: {self.message}"

    def to_dict(self) -> dict:
        return asdict(self)
