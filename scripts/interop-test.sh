#!/usr/bin/env bash
# Runs the interoperability tests (Tests/interop): Deepgram's and OpenAI's own SDKs (pinned in
# scripts/test-requirements.txt, installed by `scripts/bootstrap.sh test`) against a real
# `steno serve` (STENO_BIN, default .build/debug/steno) with real speech.
#   scripts/interop-test.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ] || ! .venv/bin/python -c 'import deepgram, openai' 2>/dev/null; then
  echo "interop-test: the vendors' SDKs are missing from .venv (run scripts/bootstrap.sh test)" >&2
  exit 1
fi
# pytest, pinned where the worker's tests pin it.
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r Tests/whisper/requirements.txt
exec .venv/bin/python -m pytest -c Tests/interop/pytest.ini -W ignore::DeprecationWarning Tests/interop "$@"
