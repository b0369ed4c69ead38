#!/usr/bin/env bash
# The test command (README, .ci/run): install the test extra, then the static checks (ruff, mypy,
# the import contracts), then the unit and end-to-end tests with every shipped claim as a test item,
# checked for correctness at its check shapes and not timed (`--claims-timing off`: timing is the main job's).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/bootstrap.sh test
.venv/bin/ruff check --quiet .
.venv/bin/mypy
.venv/bin/lint-imports --no-cache
exec .venv/bin/python -m pytest -q -n auto tests --claims claims --claims-timing off \
  --claims-results results/.cache/test-records "$@"
