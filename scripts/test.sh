#!/usr/bin/env bash
# Sets up a virtual environment (./.venv) with privfit and its test dependencies, then runs the whole suite.
# Extra arguments go to pytest, e.g. `bash scripts/test.sh tests/privacy -x`.
set -euo pipefail
cd "$(dirname "$0")/.."
python_bin="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python_bin" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e ".[test]"
.venv/bin/ruff check service tests benchmarks
exec .venv/bin/python -m pytest "$@"
