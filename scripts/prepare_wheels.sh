#!/usr/bin/env bash
# Download the wheels the lent H200 lacks into .whl/ (ignored by git), for its Python 3.12 x86-64.
# The machine has no network and no pydantic; .library/device/KINDS.md lists what it has
# (pyyaml, nvidia-ml-py and typing-extensions are there; typing-extensions is carried anyway,
# since pydantic needs a recent one). Versions are the ones installed here, so what was tested
# here is what travels. scripts/gpu_check.sh installs them into /tmp/site on the machine.
#   bash scripts/prepare_wheels.sh          # pydantic, pydantic-core, annotated-types,
#                                           # typing-inspection, typing-extensions
#   bash scripts/prepare_wheels.sh --all    # also pyyaml and nvidia-ml-py
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
names=(pydantic pydantic-core annotated-types typing-inspection typing-extensions)
if [ "${1:-}" = "--all" ]; then names+=(pyyaml nvidia-ml-py); fi
mkdir -p .whl
for name in "${names[@]}"; do
  version=$("$PY" -c "import sys; from importlib.metadata import version; print(version(sys.argv[1]))" "$name")
  stem=$(echo "$name" | tr '-' '_')
  rm -f .whl/"${stem}"-*.whl .whl/"${name}"-*.whl   # one version of each: two stop the install there
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl "${name}==${version}"
done
ls -l .whl
du -ch .whl/*.whl | tail -1
