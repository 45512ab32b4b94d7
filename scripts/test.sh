#!/usr/bin/env bash
# Sets up ./.venv with privfit and its test dependencies, lints, then runs the whole suite on SQLite and on the
# local PostgreSQL (127.0.0.1:5432; PRIVFIT_TEST_POSTGRES_URL overrides). Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh test
.venv/bin/ruff check service tests benchmarks alembic docker
exec .venv/bin/python -m pytest "$@"
