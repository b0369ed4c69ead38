"""Older record shapes, brought up to the current one on load.

A record is evidence kept for as long as its number is on the list, so a record written by an
older claimbench must stay readable: each step below turns one ``schema_version`` into the next,
and `upgrade` applies them in order. A version with no step, or a version newer than this
claimbench, is refused rather than guessed at (asv keeps its results readable the same way).
"""

from __future__ import annotations

from typing import Any

from claimbench.versions import SCHEMA_VERSION


class MigrationError(ValueError):
    """The record's ``schema_version`` cannot be brought to the current one; the message says why."""


def _migrate_1_to_2(d: dict) -> dict:
    """Version 1 kept `status` for the verdict and no per-sample process index."""
    d = dict(d)
    if "status" in d and "verdict" not in d:
        d["verdict"] = d.pop("status")
    for side in ("kernel", "baseline"):
        t = dict(d.get(side) or {})
        if t.get("samples_us") and not t.get("processes"):
            t["processes"] = [0] * len(t["samples_us"])
        d[side] = t
    d["schema_version"] = 2
    return d


def _migrate_2_to_3(d: dict) -> dict:
    """Version 2 did not copy the claim's hardware and workload blocks: they stay None, and the
    claim agreement check covers what version 2 copied (claimed, precision, flops, bytes)."""
    return {**d, "schema_version": 3}


def _migrate_3_to_4(d: dict) -> dict:
    """Version 3 had no sweeps: every record is of its claim's own params (no `sweep_point`)."""
    return {**d, "schema_version": 4}


MIGRATIONS = {1: _migrate_1_to_2, 2: _migrate_2_to_3, 3: _migrate_3_to_4}


def upgrade(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` at the current ``schema_version`` (itself when already current); MigrationError
    for a version that is missing, not an integer, newer than this claimbench, or without a step."""
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise MigrationError("schema_version is missing or not an integer")
    if version > SCHEMA_VERSION:
        raise MigrationError(f"schema_version {version} is newer than this claimbench reads ({SCHEMA_VERSION}); "
                             "upgrade claimbench")
    while version < SCHEMA_VERSION:
        if version not in MIGRATIONS:
            raise MigrationError(f"no migration from schema_version {version}")
        try:
            data = MIGRATIONS[version](data)
        except (TypeError, ValueError, AttributeError) as e:  # a block of a shape that version never wrote
            raise MigrationError(f"cannot migrate from schema_version {version}: {type(e).__name__}: {e}") from None
        version = data["schema_version"]
    return data
