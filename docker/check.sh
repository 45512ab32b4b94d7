#!/usr/bin/env bash
# Validates the container setup without a Docker engine (CI calls this after the tests):
#   1. copies the build context the .dockerignore allowlist lets in, and runs the image's install step on it
#      (docker/install.sh: a fresh venv, privfit installed NOT editable, dependencies from pyproject.toml only);
#   2. `docker compose config -q` when the docker client has compose (else says why it skips), then the static
#      checks of docker/check_compose.py (every PRIVFIT_* value accepted by privfit's Settings, start order...);
#   3. the image's start commands from that venv, in an empty working directory, with the image's environment
#      (docker/Dockerfile ENV, paths moved under a temp dir) on SQLite and PRIVFIT_QUEUE=none: `privfit migrate`,
#      then docker/start-api.sh (gunicorn and 2 uvicorn workers, the image's default); waits for /healthz and
#      /readyz to answer 200 through docker/healthcheck.py (the image's HEALTHCHECK) and for the supervisor's "all 2
#      API processes ready" line, that the dashboard's assets are served from the installed package, checks every
#      log line is JSON and the access log and gunicorn's own lines went through it, then SIGTERM and checks the
#      server exited 0 after a graceful shutdown and its worker processes exited.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
began=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/privfit-docker-check.XXXXXX")
server=""
cleanup() {
  if [ -n "$server" ] && kill -0 "$server" 2>/dev/null; then
    kill -TERM "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
step() { echo "docker/check.sh [$(($(date +%s) - began))s] $*"; }

# 1. The build context (`!` lines of .dockerignore, minus its other patterns) and the install step.
includes=()
excludes=()
while IFS= read -r line; do
  case "$line" in
    '' | '#'* | '*') ;;
    '!'*) includes+=("${line#!}") ;;
    *) excludes+=("--exclude=${line#\*\*/}") ;;
  esac
done <.dockerignore
mkdir "$work/src" "$work/run" "$work/data"
tar -C "$repo" "${excludes[@]}" -cf - "${includes[@]}" | tar -C "$work/src" -xf -
step "build context: ${includes[*]}"
NUMBA_CACHE_DIR="$work/numba-cache" sh "$work/src/docker/install.sh" "$work/venv" "$work/src" >"$work/install.log" 2>&1 \
  || { cat "$work/install.log"; exit 1; }
step "installed: $("$work/venv/bin/pip" show privfit | awk '/^Version/{print $2}') into a fresh venv, not editable;" \
  "$(find "$work/numba-cache" -name '*.nbc' | wc -l) compiled kernels cached"
python="$work/venv/bin/python"

# 2. Compose file.
if ! command -v docker >/dev/null 2>&1; then
  step "skip 'docker compose config': no docker client on PATH"
elif ! compose_version=$(docker compose version 2>&1); then
  step "skip 'docker compose config': the docker client has no compose plugin ($(echo "$compose_version" | head -1))"
else
  POSTGRES_PASSWORD=check docker compose -f docker/compose.yaml config -q
  step "docker compose config: valid ($compose_version)"
fi
"$python" docker/check_compose.py docker/compose.yaml

# 3. Start as the image does. Environment: docker/Dockerfile's runtime ENV with its paths under $work; SQLite and
#    no queue instead of compose's PostgreSQL and Celery.
port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PATH="$work/venv/bin:$PATH" PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR="$work/numba-cache"
export PRIVFIT_ALEMBIC_INI="$work/src/alembic.ini" PRIVFIT_DATABASE_URL="sqlite:///$work/data/privfit.db"
export PRIVFIT_DATA_DIR="$work/data/objects" PRIVFIT_API_WORKERS=2 PRIVFIT_LOG_FORMAT=json PRIVFIT_QUEUE=none
cd "$work/run"
privfit migrate >"$work/migrate.log" 2>&1 || { cat "$work/migrate.log"; exit 1; }
step "privfit migrate: $(tail -1 "$work/migrate.log")"
sh "$work/src/docker/start-api.sh" --host 127.0.0.1 --port "$port" >"$work/api.log" 2>&1 &
server=$!
wait_for() {
  local url=$1 deadline=$(($(date +%s) + 240))   # generous: CI's machine may be loaded (issue 35)
  until "$python" "$work/src/docker/healthcheck.py" "$url" 2>/dev/null; do
    if ! kill -0 "$server" 2>/dev/null || [ "$(date +%s)" -gt "$deadline" ]; then
      echo "docker/check.sh: $url did not answer 200; server log:" >&2
      tail -40 "$work/api.log" >&2
      exit 1
    fi
    sleep 0.5
  done
  step "$url: 200"
}
wait_for "http://127.0.0.1:$port/healthz"
wait_for "http://127.0.0.1:$port/readyz"
deadline=$(($(date +%s) + 240))
until grep -q '"all 2 API processes ready' "$work/api.log"; do
  if ! kill -0 "$server" 2>/dev/null || [ "$(date +%s)" -gt "$deadline" ]; then
    echo "docker/check.sh: the supervisor never logged that both API processes are ready; server log:" >&2
    tail -40 "$work/api.log" >&2
    exit 1
  fi
  sleep 0.5
done
step "$(grep -o '"all 2 API processes ready[^"]*' "$work/api.log" | head -1 | tr -d '"')"
# the dashboard's assets ship inside the installed (not editable) package
"$python" - "http://127.0.0.1:$port" <<'EOF'
import sys
import urllib.request
for path, marker in (("/ui/", b"<html"), ("/ui/static/app.js", b"import")):
    with urllib.request.urlopen(sys.argv[1] + path, timeout=10) as response:
        body = response.read()
        assert response.status == 200 and marker in body, f"{path}: {response.status}, {body[:80]!r}"
EOF
step "the dashboard's assets are served from the installed package"
children=$(pgrep -P "$server" | tr '\n' ' ' || true)  # gunicorn's workers
"$python" - "$work/api.log" <<'EOF'
import json, sys
lines = [line for line in open(sys.argv[1]) if line.strip()]
entries = [json.loads(line) for line in lines]  # raises on any line that is not one JSON object
access = [e for e in entries if e["logger"] == "uvicorn.access" and e.get("path") == "/readyz" and e["status"] == 200]
assert access, "no JSON access-log line for GET /readyz"
assert any(e["logger"] == "gunicorn.error" for e in entries), "gunicorn's own lines are not in privfit's format"
ready = [e for e in entries if e["message"].startswith("API process") and "startup_seconds" in e]
assert len(ready) == 2, f"{len(ready)} 'API process ... ready' lines with their start-up time, not 2"
print(f"docker/check.sh: {len(entries)} log lines, all JSON; access log e.g. {json.dumps(access[0])}")
EOF

kill -TERM "$server"
deadline=$(($(date +%s) + 60))
while kill -0 "$server" 2>/dev/null; do
  if [ "$(date +%s)" -gt "$deadline" ]; then
    echo "docker/check.sh: the server ignored SIGTERM for 60 s" >&2
    exit 1
  fi
  sleep 0.2
done
status=0
wait "$server" || status=$?
server=""
deadline=$(($(date +%s) + 10))
for child in $children; do
  while kill -0 "$child" 2>/dev/null; do
    if [ "$(date +%s)" -gt "$deadline" ]; then
      echo "docker/check.sh: child process $child outlived the server by 10 s: $(ps -o args= -p "$child")" >&2
      exit 1
    fi
    sleep 0.2
  done
done
grep -q '"Finished server process' "$work/api.log" || { tail -20 "$work/api.log" >&2; exit 1; }
step "SIGTERM: the server and its child processes ($children) exited (status $status) after a graceful shutdown"
[ "$status" -eq 0 ] || { echo "docker/check.sh: exit status $status" >&2; tail -20 "$work/api.log" >&2; exit 1; }
step "passed"
