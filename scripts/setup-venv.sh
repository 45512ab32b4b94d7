#!/usr/bin/env bash
# Creates ./.venv if needed and installs privfit (editable) with the given extras, quietly, then compiles the
# solvers' kernels (`privfit compile`: a fresh server's first fit does not). Skips both when .venv already holds an
# install made from the same pyproject.toml (and Python) with these extras: a restart of scripts/serve.sh then takes
# a second, not the 25 s of pip resolving an unchanged environment.
# Usage: source scripts/setup-venv.sh [extras]   e.g. `source scripts/setup-venv.sh test`
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python_bin="${PYTHON:-python3}"
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
stamp=.venv/.privfit-install   # "<sha256 of pyproject.toml and the venv's Python version> <extras installed>"
fingerprint=$( { cat pyproject.toml; .venv/bin/python --version; } | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ -x .venv/bin/privfit ]; then
  read -r stamped_fingerprint stamped_extras < "$stamp" || true
  if [ "$stamped_fingerprint" = "$fingerprint" ] && { [ -z "$extras" ] || [[ ",${stamped_extras:-}," == *",$extras,"* ]]; }; then
    exit 0   # nothing changed since the last install
  fi
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if [ -n "$extras" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$extras]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
# the solvers' numba kernels compiled and cached now, not by the first fit (privfit.solvers.warmup)
.venv/bin/privfit compile > /dev/null
if [ -f "$stamp" ] && [ "$(cut -d' ' -f1 "$stamp")" = "$fingerprint" ]; then
  installed=$(cut -s -d' ' -f2 "$stamp")
else
  installed=""
fi
if [ -n "$extras" ] && [[ ",$installed," != *",$extras,"* ]]; then
  installed="${installed:+$installed,}$extras"
fi
echo "$fingerprint $installed" > "$stamp"
