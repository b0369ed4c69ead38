#!/usr/bin/env bash
# Create .venv and install claimbench with the extras named (default: test, which brings run, site
# and table too). `./scripts/bootstrap.sh run` is what the main job needs; with no torch in an
# extra (e.g. `./scripts/bootstrap.sh core`), torch is not installed at all.
# Torch is heavy: on a machine without a GPU, install its CPU build first. Set TORCH_SPEC to
# choose (default: torch==2.13.0, whose CPU wheel is on this project's CI machines); elsewhere use
# e.g. TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cpu".
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
EXTRAS=${*:-test}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
spec="."
wants_torch=0
for extra in $EXTRAS; do
  case "$extra" in
    core) ;;
    run|test|cuda) wants_torch=1; spec="$spec,$extra" ;;
    *) spec="$spec,$extra" ;;
  esac
done
spec=${spec/.,/.[}
[ "$spec" = "." ] || spec="$spec]"
# find_spec, not `import torch`: the import alone is about 2 s of CPU on a 2-core machine
if [ "$wants_torch" = 1 ] && ! .venv/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)" 2>/dev/null; then
  echo "bootstrap: installing ${TORCH_SPEC:-torch==2.13.0} into .venv (a few minutes on a fresh machine)" >&2
  # shellcheck disable=SC2086
  .venv/bin/python -m pip install -q --no-compile ${TORCH_SPEC:-torch==2.13.0}
  installed_now=1
fi
# What was installed, per extras: pyproject.toml's hash and this checkout's path. When they match and
# the venv's claimbench is this checkout's src/, pip is not run again (3.4 s a call here, paid by the
# README's two commands on every run); any change to pyproject.toml installs again.
stamp=".venv/.claimbench-installed-$(printf '%s' "$spec" | sha256sum | cut -c1-16)"
want="$(sha256sum pyproject.toml | cut -c1-64) $PWD"
# The stamp alone would not see a package removed by hand since: every requirement of the extras
# asked for must still be installed (0.1 s).
installed() {
  .venv/bin/python - "$PWD/src/" $EXTRAS <<'PY' 2>/dev/null
import re, sys
from importlib.metadata import PackageNotFoundError, distribution, requires
import claimbench
if not claimbench.__file__.startswith(sys.argv[1]):
    sys.exit(1)  # the venv's claimbench is another checkout's
reqs, extras = requires("claimbench") or [], set(sys.argv[2:]) - {"core"}
for req in reqs:  # an extra naming others (test: claimbench[run,site,table]) asks for theirs too
    m = re.match(r"claimbench\[([^\]]*)\].*extra\s*==\s*\"([^\"]+)\"", req)
    if m and m.group(2) in extras:
        extras |= {e.strip() for e in m.group(1).split(",")}
for req in reqs:
    name = re.match(r"[A-Za-z0-9._-]+", req).group(0)
    m = re.search(r"extra\s*==\s*\"([^\"]+)\"", req)
    if name == "claimbench" or (m and m.group(1) not in extras):
        continue
    try:
        distribution(name)
    except PackageNotFoundError:
        sys.exit(1)
PY
}
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && installed; then
  echo "bootstrap: claimbench with extras '$EXTRAS' is installed in .venv (pyproject.toml unchanged since)" >&2
else
  echo "bootstrap: installing claimbench with extras '$EXTRAS' into .venv" >&2
  # Where the venv already has a setuptools that builds an editable wheel alone (71 or later, which
  # needs no `wheel` package; torch brings one), building in the venv skips pip's isolated build
  # environment: 5.4 -> 2.8 s here. A bare venv (Python 3.11's has setuptools 65) builds isolated.
  isolation=""
  if .venv/bin/python -c "import sys, setuptools; sys.exit(int(setuptools.__version__.split('.')[0]) < 71)" 2>/dev/null; then
    isolation="--no-build-isolation"
  fi
  # uv installs the extras where it can: it downloads and unpacks the wheels on every core, where pip
  # unpacks Triton's 1 GB wheel on one (a fresh venv with torch, cold caches, one run each: pip 19.7 s,
  # uv 6.7 s plus 1.6 s to install uv). Torch stays pip's above: pip finds its CPU wheel on the machine
  # (find-links), uv does not look there. Where uv cannot be installed or fails, pip does the install.
  # shellcheck disable=SC2086
  if { [ -x .venv/bin/uv ] || .venv/bin/python -m pip install -q --no-compile uv >/dev/null 2>&1; } \
      && .venv/bin/uv pip install -q --python .venv/bin/python $isolation -e "$spec"; then
    :
  else
    echo "bootstrap: uv could not install the extras; pip installs them (slower)" >&2
    # shellcheck disable=SC2086
    .venv/bin/python -m pip install -q --no-compile $isolation -e "$spec"
  fi
  echo "$want" > "$stamp"
  installed_now=1
fi
# `--no-compile` above: pip byte-compiles every module it installs one file at a time, about 9,800
# files here (torch 29 -> 10 s and the test extras 41 -> 31 s without it, on a 2-core machine).
# compileall does it on every core, skipping what no run imports: the packages' own test suites, pip,
# setuptools and mypy's sources (mypy compiles its own in the one process that runs it). Every module a
# claim's side may import must be compiled here: a side confined by Landlock cannot write its bytecode
# into .venv, so a missing one would be compiled again in every side that imports it (torch._dynamo,
# torch.testing, which `import torch` loads), and so would every process where PYTHONDONTWRITEBYTECODE
# is set. Checked: importing torch, Triton, dynamo, Inductor, torch.distributed, flex attention, pandas,
# matplotlib and pytest afterwards compiles nothing more.
if [ "${installed_now:-0}" = 1 ]; then
  echo "bootstrap: compiling the installed modules" >&2
  site=$(.venv/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  # A file written for a later Python (torch ships torch/testing/_internal/py312_intrinsics.py) fails
  # here and can never be imported: pip skips it without a word; this names how many, and goes on.
  if ! failed=$(.venv/bin/python -m compileall -q -j 0 \
      -x '/tests/|site-packages/(pip|setuptools|mypy|mypyc)/' "$site" src 2>&1); then
    echo "bootstrap: $(printf '%s\n' "$failed" | grep -c '^\*\*\* Error compiling') installed file(s) are not valid for" \
         "this Python and stay uncompiled (Python could not import them either): $(printf '%s\n' "$failed" | grep -m1 '^\*\*\*')" >&2
  fi
fi
# The sandbox `claimbench run` prefers (README, "How a run is isolated"): installed where this script
# can (as root, with apt-get, once; CLAIMBENCH_NO_SYSTEM_PACKAGES=1 leaves the system alone), else
# one line says how. Without it, Landlock confines each side where the kernel has it.
if ! command -v bwrap >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 \
    && [ -z "${CLAIMBENCH_NO_SYSTEM_PACKAGES:-}" ]; then
  echo "bootstrap: installing bubblewrap, the sandbox claims run in (apt-get; CLAIMBENCH_NO_SYSTEM_PACKAGES=1 skips this)" >&2
  # bounded: a machine without its package mirrors must not hang here
  { DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1 \
    || { timeout 120 apt-get update -qq >/dev/null 2>&1 \
         && DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1; }; } \
    || echo "bootstrap: apt-get could not install bubblewrap" >&2
fi
command -v bwrap >/dev/null 2>&1 || echo "bootstrap: no bubblewrap: claims run confined by Landlock where the kernel has it (Linux 5.13+), else unsandboxed; claimbench run says which (as root: apt-get install bubblewrap)" >&2
