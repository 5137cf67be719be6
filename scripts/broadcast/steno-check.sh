#!/usr/bin/env bash
# The broadcast check with Steno feeding OBS (part of `make test`, and `make broadcast-check`):
# a real OBS streams over RTMP while `steno listen --obs` puts a channel's captions into it
# and `steno send` publishes speech on the channel; ffmpeg must find every word of the finals
# as CEA-608 captions in the recorded stream. See check.sh and README.md here.
#   STENO=path/to/steno (default .build/debug/steno)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d /tmp/steno-broadcast-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
export STENO=${STENO:-$root/.build/debug/steno}
export AUDIO=$root/Tests/StenoCLITests/Resources/beckett.wav
export EXPECTED=$work/finals.txt
export FEEDER="$root/scripts/broadcast/steno-feeder.sh"
export FEEDER_TIMEOUT=${FEEDER_TIMEOUT:-90}
# Every word of the finals must come through.
export MIN_WORDS=${MIN_WORDS:-1}
exec "$root/scripts/broadcast/check.sh" "$@"
