"""Older record shapes are brought to the current one; what cannot be is refused with its reason."""

from __future__ import annotations

import pytest

from claimbench.store.migrate import MigrationError, upgrade
from claimbench.store.record import RecordError, parse_record
from claimbench.versions import SCHEMA_VERSION


def test_a_version_1_record_reaches_the_current_shape_step_by_step():
    old = {"schema_version": 1, "status": "verified", "kernel": {"samples_us": [1.0, 2.0]}, "baseline": {}}
    new = upgrade(old)
    assert new["schema_version"] == SCHEMA_VERSION
    assert new["verdict"] == "verified" and "status" not in new
    assert new["kernel"]["processes"] == [0, 0]
    assert old["schema_version"] == 1 and "status" in old  # the caller's data is left as it was


@pytest.mark.parametrize(("version", "why"), [
    (None, "missing or not an integer"), (True, "missing or not an integer"), ("4", "missing or not an integer"),
    (0, "no migration from schema_version 0"), (-3, "no migration from schema_version -3"),
    (SCHEMA_VERSION + 1, "newer than this claimbench reads"),
])
def test_a_version_that_cannot_be_brought_up_is_refused_and_parse_record_names_the_file(version, why):
    data = {"schema_version": version}
    with pytest.raises(MigrationError, match=why):
        upgrade(data)
    with pytest.raises(RecordError, match=f"^x.json: .*{why}"):
        parse_record(data, "x.json")


@pytest.mark.parametrize("side", ["xy", 7, [1, 2]])
def test_a_block_of_a_shape_the_old_version_never_wrote_is_refused_not_a_traceback(side):
    """`_migrate_1_to_2` ran outside parse_record's error handling: audit, publish and show stopped
    with a ValueError on a schema-1 record whose `kernel` was a string (an adversarial review)."""
    data = {"schema_version": 1, "status": "verified", "kernel": side}
    with pytest.raises(MigrationError, match="cannot migrate from schema_version 1"):
        upgrade(data)
    with pytest.raises(RecordError, match="^x.json: cannot migrate"):
        parse_record(data, "x.json")
