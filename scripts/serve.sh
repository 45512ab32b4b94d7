#!/usr/bin/env bash
# Sets up ./.venv with privfit, then starts the service on SQLite (./privfit.db, migrated on start) with its
# embedded worker pool at http://127.0.0.1:8000, in PRIVFIT_API_WORKERS processes (2 by default: gunicorn supervising
# uvicorn workers; 1: one uvicorn process). It is ready when GET /healthz answers (the log then says "all 2 API
# processes ready"); Ctrl-C or SIGTERM stops it within PRIVFIT_STOP_GRACE_SECONDS (docs/deployment.md, "Start and
# stop"). Extra arguments go to `privfit serve` (e.g. --port 9000, --workers 1).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
exec .venv/bin/privfit serve "$@"
