#!/usr/bin/env bash
# Creates ./.venv if needed and installs privfit (editable) with the given extras, quietly.
# Usage: source scripts/setup-venv.sh [extras]   e.g. `source scripts/setup-venv.sh test`
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
python_bin="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if [ -n "${1:-}" ]; then
  .venv/bin/python -m pip install --quiet -e ".[$1]"
else
  .venv/bin/python -m pip install --quiet -e .
fi
