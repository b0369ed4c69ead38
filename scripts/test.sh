#!/usr/bin/env bash
# The test command (README, .ci/run): install the test extra, then the static checks (ruff, the
# import contracts, mypy), then the unit and end-to-end tests with every shipped claim as a test item,
# checked for correctness at its check shapes and not timed (`--claims-timing off`: timing is the main job's).
# Extra arguments go to pytest.
# mypy (about 20 s of one core) runs beside the tests. Either failing fails the command; mypy's
# output is printed after the tests'. `--dist worksteal`: an idle worker takes queued tests from the busy one,
# so the run does not end on one worker finishing the long end-to-end tests alone. One worker more
# than the cores: a test's processes take turns (the orchestrator waits on each side), and the
# timeout tests wait by design, so N workers left cores idle. On this project's 2-core VM, one run
# each: pytest 565 s with 2 workers, 485 s with 3, every test passing (the tests hold a busy machine
# to `inconclusive`, never to a wrong verdict). Four (2026-12-06): 268, 291, 307 and 322 s in four runs
# against 279-287 s with three, and more load on each test: not kept.
set -euo pipefail
cd "$(dirname "$0")/.."
# Bytecode is written (into __pycache__ folders git ignores): with PYTHONDONTWRITEBYTECODE set, as on
# this project's VMs, each of the run's ~150 Python processes compiled claimbench's modules again and
# each worker re-rewrote every test module's asserts. One run each here: pytest 302 s and 573 CPU-s
# with it set, 289 s and 546 CPU-s without. The sides import kernels/ from source whatever this says
# (side/loader.py).
unset PYTHONDONTWRITEBYTECODE
./scripts/bootstrap.sh test
.venv/bin/ruff check --quiet .
.venv/bin/lint-imports --no-cache
types_log=$(mktemp)
trap 'rm -f "$types_log"' EXIT
.venv/bin/mypy >"$types_log" 2>&1 &
types_pid=$!
set +e
.venv/bin/python -m pytest -q -n "$(( $(nproc) + 1 ))" --dist worksteal tests --claims claims --claims-timing off \
  --claims-results results/.cache/test-records "$@"
tests=$?
wait "$types_pid"
types=$?
set -e
echo "mypy:"
cat "$types_log"
if [ "$types" -ne 0 ]; then
  echo "test.sh: mypy failed (exit $types)" >&2
fi
if [ "$tests" -ne 0 ] || [ "$types" -ne 0 ]; then
  exit $(( tests != 0 ? tests : 1 ))
fi
