#!/usr/bin/env bash
# Runs the browser tests (Tests/browser) in headless chromium against a built steno binary.
#   scripts/browser-test.sh [pytest arguments]
# Needs: apt packages chromium, nodejs and node-ws (scripts/bootstrap.sh test installs them);
# a steno binary (STENO_BIN, default .build/debug/steno). Creates .venv with
# Tests/browser/requirements.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

STENO_BIN="${STENO_BIN:-.build/debug/steno}"
if [ ! -x "$STENO_BIN" ]; then
  echo "browser-test: no steno executable at $STENO_BIN (run swift build, or set STENO_BIN)" >&2
  exit 1
fi
export STENO_BIN="$(realpath "$STENO_BIN")"

CHROMIUM="${STENO_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  echo "browser-test: chromium not found at $CHROMIUM (apt-get install -y chromium)" >&2
  exit 1
fi

if ! command -v "${STENO_NODE:-node}" >/dev/null; then
  echo "browser-test: node not found (scripts/bootstrap.sh test installs Debian's nodejs and node-ws)" >&2
  exit 1
fi

if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r Tests/browser/requirements.txt

exec .venv/bin/python -m pytest Tests/browser "$@"
