#!/usr/bin/env bash
# The broadcast check's feeder with Steno's own parts (run by check.sh as FEEDER, with OBS_URL
# and OBS_PASSWORD set): a `steno serve` on loopback, `steno listen --channel … --obs` feeding
# OBS, and `steno send` publishing speech at real time on the channel. The finals `steno send`
# prints are the captions' reference: written to $EXPECTED (one a line) for check.sh.
#   STENO=path/to/steno  AUDIO=file.wav  EXPECTED=file  [ENGINE=pocketsphinx]
set -euo pipefail
: "${STENO:?}" "${AUDIO:?}" "${EXPECTED:?}" "${OBS_URL:?}" "${OBS_PASSWORD:?}"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
cleanup() { for pid in "${pids[@]}"; do kill -INT "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$STENO" serve --host 127.0.0.1 --port "$port" --engine "${ENGINE:-pocketsphinx}" --log-level warning &
pids+=($!)
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
    sleep 0.1
done

"$STENO" listen --channel broadcast-check --server "ws://127.0.0.1:$port" --obs "$OBS_URL" \
    --obs-password "$OBS_PASSWORD" --format text > /dev/null &
pids+=($!)
sleep 1

# The reference: what Steno heard (`[start → end] text` lines, the text kept).
"$STENO" send "$AUDIO" --server "ws://127.0.0.1:$port" --channel broadcast-check | sed 's/^\[[^]]*\] //' > "$EXPECTED"
echo "feeder: $(wc -l < "$EXPECTED") finals published; waiting for the last captions to be shown"
# The last captions are paced (each stays up as long as its words took): give them time.
sleep 4
