#!/usr/bin/env bash
# The Whisper worker with a multilingual model (not installed by scripts/bootstrap.sh, so not
# part of `make test`): its hello, the language it finds, the language it is told.
#   scripts/whisper-multilingual-check.sh DIR     (a CTranslate2 Whisper folder, e.g. base)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 1 ] && [ -f "$1/model.bin" ] || { echo "usage: $0 DIR (a CTranslate2 Whisper model folder)" >&2; exit 2; }
.venv/bin/python -m pip install --quiet --disable-pip-version-check -r Tests/whisper/requirements.txt
STENO_WHISPER_MULTILINGUAL_MODEL="$(cd "$1" && pwd)" exec .venv/bin/python -m pytest -c Tests/whisper/pytest.ini Tests/whisper/multilingual_check.py
