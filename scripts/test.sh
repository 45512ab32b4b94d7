#!/usr/bin/env bash
# Sets up ./.venv with privfit and its test dependencies, lints (ruff) and type-checks (mypy), then runs the whole
# suite on SQLite and on the local PostgreSQL (127.0.0.1:5432; PRIVFIT_TEST_POSTGRES_URL overrides), with the
# dashboard's browser tests in headless Chromium. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh test
bash scripts/install-browser.sh   # Debian's chromium + chromedriver for the dashboard's browser tests
.venv/bin/ruff check service tests benchmarks alembic docker examples
.venv/bin/mypy   # [tool.mypy] in pyproject.toml: strict on privfit.privacy, privfit.ledger, privfit.solvers
exec .venv/bin/python -m pytest --durations=30 "$@"   # the 30 slowest tests, for keeping the suite near 15 min
