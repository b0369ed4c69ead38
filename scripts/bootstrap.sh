#!/usr/bin/env bash
# Create .venv and install claimbench with its test tools, on a fresh machine.
# Torch is heavy: on a machine without a GPU, install its CPU build first. Set TORCH_SPEC to
# choose (default: torch==2.13.0, whose CPU wheel is on this project's CI machines); elsewhere use
# e.g. TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu".
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  # shellcheck disable=SC2086
  .venv/bin/python -m pip install -q ${TORCH_SPEC:-torch==2.13.0}
fi
.venv/bin/python -m pip install -q -e '.[test]'
