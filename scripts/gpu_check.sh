#!/usr/bin/env bash
# The H200 proof in one command (issue 7; docs/gpu_check.md). On the lent machine:
#   bash scripts/gpu_check.sh --out "$OUT" --budget-s 280 --commit <sha> --dirty 0
# Rehearsal on a CPU machine:
#   bash scripts/gpu_check.sh --out /tmp/gc --budget-s 120 --dry-run
# Wheels carried in .whl/ (scripts/prepare_wheels.sh: pydantic and its needs, which the
# machine lacks) are installed into /tmp/site first when this Python has no pydantic 2;
# claimbench runs from src/ without being installed.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
if compgen -G ".whl/*.whl" > /dev/null && \
   ! "$PY" -c "import sys, pydantic; sys.exit(pydantic.VERSION[0] != '2')" 2>/dev/null; then
  echo "gpu_check.sh: installing $(ls .whl/*.whl | wc -l) carried wheel(s) into /tmp/site"
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1
exec "$PY" scripts/gpu_check.py "$@"
