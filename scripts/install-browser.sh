#!/usr/bin/env bash
# Installs Debian's headless Chromium and its ChromeDriver (packages chromium, chromium-driver) for the dashboard's
# browser tests (tests/api/test_dashboard.py), unless both are already on the machine. Needs root or sudo; without
# them it says so and the browser tests skip with that reason (under CI=true they fail instead).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  run=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
  run=(sudo -n)
else
  echo "install-browser: chromium/chromedriver missing and no root or sudo to install them" >&2
  [ "${CI:-}" = "true" ] && exit 1
  exit 0
fi
echo "install-browser: installing Debian's chromium and chromium-driver"
"${run[@]}" apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive "${run[@]}" apt-get install -y -q --no-install-recommends chromium chromium-driver >/dev/null
chromium --version
