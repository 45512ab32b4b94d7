#!/usr/bin/env bash
# Sets up ./.venv with privfit and its test dependencies, lints (ruff) and type-checks (mypy), then runs the whole
# suite on SQLite and on the local PostgreSQL (127.0.0.1:5432; PRIVFIT_TEST_POSTGRES_URL overrides), with the
# dashboard's browser tests in headless Chromium. Extra arguments go to pytest.
# The suite runs in parallel (pytest-xdist): PRIVFIT_TEST_WORKERS processes (default: one per core, at most 4), with
# `--dist loadgroup`: the tests of a group in XDIST_GROUPS (tests/conftest.py) share one worker; PRIVFIT_TEST_WORKERS=0
# runs the suite serially in one process (no xdist), e.g. to debug one test with pdb.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh test
bash scripts/install-browser.sh   # Debian's chromium + chromedriver for the dashboard's browser tests
.venv/bin/ruff check service tests benchmarks alembic docker examples
.venv/bin/mypy   # [tool.mypy] in pyproject.toml: strict on privfit.privacy, privfit.ledger, privfit.solvers
cores=$(nproc 2>/dev/null || echo 2)
workers="${PRIVFIT_TEST_WORKERS:-$(( cores < 4 ? cores : 4 ))}"
parallel=()
if [ "$workers" != 0 ]; then
  parallel=(-n "$workers" --dist loadgroup)
fi
# the 30 slowest tests, for keeping the suite near 15 min
exec .venv/bin/python -m pytest ${parallel[@]+"${parallel[@]}"} --durations=30 "$@"
