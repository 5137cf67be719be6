#!/usr/bin/env bash
# The broadcast check: captions sent into OBS Studio over obs-websocket 5 must come out as
# CEA-608 captions in the H.264 stream that OBS sends over RTMP. All parts are real: OBS
# (headless, Xvfb + Mesa llvmpipe, x264) streams to a local nginx-rtmp that records the stream
# to .flv; a feeder sends captions (SendStreamCaption) while OBS streams; ffmpeg's own CEA-608
# decoder (lavfi movie=...[out0+subcc]) reads them back out of the recording.
#
#   scripts/broadcast/check.sh [--install] [--keep]
#
#   --install   apt-get install the Debian packages the rig needs if any is missing
#   --keep      keep the work directory (recording, logs, captions.srt) even when it passes
#
# Environment:
#   FEEDER="command ..."  run this instead of the built-in feeder (obs_send_captions.py sending
#                     sentences.txt), through bash -c, once OBS streams, with OBS_URL
#                     (ws://127.0.0.1:PORT) and OBS_PASSWORD exported; e.g.
#                     FEEDER='steno listen --channel X --obs "$OBS_URL" --obs-password "$OBS_PASSWORD"'
#   FEEDER_TIMEOUT    seconds the feeder may run before it is stopped (default 120; being
#                     stopped then is not a failure, for a feeder that runs until killed)
#   EXPECTED=FILE     sentences the captions should hold, one a line (default: sentences.txt
#                     with the built-in feeder, none with FEEDER: then any caption passes)
#   MIN_WORDS=0.8     the share of the expected words that must come out
#   INTERVAL=3        seconds between the built-in feeder's captions
#   OBS_PASSWORD      the obs-websocket password (default: a random one)
#   OUT=DIR           the work directory (default: a new one under /tmp, removed on success)
#   BROADCAST_NETNS=0 run in this machine's network instead of a new network namespace that
#                     has only loopback (the default when `unshare --net` works: OBS's
#                     rtmp-services plugin fetches https://obsproject.com/... at every start,
#                     and obs-websocket listens on all interfaces, not just loopback). Use 0
#                     when FEEDER must reach a server outside the check.
#
# Exit status: 0 captions came through (and enough of the expected words); 1 they did not;
# 2 the rig could not be set up (a package missing, a process that did not start).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
INSTALL=0
KEEP=${KEEP:-0}
for arg in "$@"; do
    case $arg in
        --install) INSTALL=1 ;;
        --keep) KEEP=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "check: unknown argument $arg" >&2; exit 2 ;;
    esac
done

PACKAGES="obs-studio xvfb nginx libnginx-mod-rtmp ffmpeg python3 iproute2"
RTMP_MODULE=/usr/lib/nginx/modules/ngx_rtmp_module.so
missing=
for p in obs:obs-studio Xvfb:xvfb nginx:nginx ffmpeg:ffmpeg ffprobe:ffmpeg python3:python3; do
    command -v "${p%%:*}" >/dev/null 2>&1 || missing="$missing ${p#*:}"
done
[ -f "$RTMP_MODULE" ] || missing="$missing libnginx-mod-rtmp"
if [ -n "$missing" ]; then
    if [ "$INSTALL" = 1 ]; then
        sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
        $sudo apt-get update
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends $PACKAGES
    else
        echo "check: missing:$missing; install with: apt-get install -y --no-install-recommends $PACKAGES (or run with --install)" >&2
        exit 2
    fi
fi

# Into a network namespace of our own, with only loopback (see BROADCAST_NETNS above).
if [ "${BROADCAST_NETNS:-1}" != 0 ] && [ -z "${STENO_BROADCAST_NETNS_INSIDE:-}" ]; then
    if [ "$(id -u)" = 0 ]; then ns=(unshare --net); else ns=(unshare --net --map-root-user); fi
    if "${ns[@]}" true 2>/dev/null; then
        export STENO_BROADCAST_NETNS_INSIDE=1
        exec "${ns[@]}" bash -c 'ip link set lo up && exec bash "$@"' bash "$0" "$@"
    fi
    echo "check: cannot make a network namespace (unshare --net); going on in this machine's network" >&2
fi

START=$(date +%s.%N)
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$START" "$(date +%s.%N)"; }
say() { echo "[check $(elapsed)s] $*"; }

if [ -n "${OUT:-}" ]; then
    WORK=$(mkdir -p "$OUT" && cd "$OUT" && pwd)
    KEEP=1
else
    WORK=$(mktemp -d /tmp/steno-broadcast.XXXXXX)
fi
chmod 700 "$WORK"
mkdir -p "$WORK/rec" "$WORK/run" "$WORK/home"
chmod 700 "$WORK/run"

PIDS=()
FEEDER_PID=
cleanup() {
    status=$?
    trap - EXIT INT TERM
    [ -n "$FEEDER_PID" ] && kill "$FEEDER_PID" 2>/dev/null || true
    for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do
        kill "${PIDS[$i]}" 2>/dev/null || true
    done
    for pid in "${PIDS[@]}"; do
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null || true
    done
    if [ "$status" = 0 ] && [ "$KEEP" != 1 ]; then
        rm -rf "$WORK"
    else
        echo "[check] the work directory is kept: $WORK"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Two free loopback ports (RTMP, obs-websocket), the password, the stream key.
read -r RTMP_PORT WS_PORT < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in socks])')
OBS_PASSWORD=${OBS_PASSWORD:-$(python3 -c 'import secrets; print(secrets.token_hex(16))')}
STREAM_KEY=steno
OBS_URL="ws://127.0.0.1:$WS_PORT"
export OBS_URL OBS_PASSWORD
obs_ws() { python3 "$HERE/obs_send_captions.py" "$@"; }

wait_port() { # wait_port PORT SECONDS PID NAME LOG
    for _ in $(seq $(($2 * 10))); do
        if python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' "$1" 2>/dev/null; then
            return 0
        fi
        if ! kill -0 "$3" 2>/dev/null; then
            echo "check: $4 ended; its log ($5):" >&2
            tail -n 30 "$5" >&2
            exit 2
        fi
        sleep 0.1
    done
    echo "check: $4 did not listen on port $1 in $2 s; its log ($5):" >&2
    tail -n 30 "$5" >&2
    exit 2
}

fill() { # fill TEMPLATE > FILE
    sed -e "s|@WORK@|$WORK|g" -e "s|@RTMP_PORT@|$RTMP_PORT|g" -e "s|@RTMP_MODULE@|$RTMP_MODULE|g" \
        -e "s|@WS_PORT@|$WS_PORT|g" -e "s|@WS_PASSWORD@|$OBS_PASSWORD|g" \
        -e "s|@STREAM_KEY@|$STREAM_KEY|g" -e "s|@OBS_VERSION_INT@|$OBS_VERSION_INT|g" "$1"
}

# 1. nginx with the RTMP module, recording to $WORK/rec/steno.flv.
OBS_VERSION_INT=0
fill "$HERE/nginx.conf.in" >"$WORK/nginx.conf"
nginx -p "$WORK/" -e "$WORK/nginx-error.log" -c "$WORK/nginx.conf" >"$WORK/nginx.out" 2>&1 &
NGINX_PID=$!
PIDS+=("$NGINX_PID")
wait_port "$RTMP_PORT" 10 "$NGINX_PID" nginx "$WORK/nginx-error.log"
say "nginx-rtmp listens on 127.0.0.1:$RTMP_PORT (pid $NGINX_PID)"

# 2. Xvfb on a free display.
exec 3>"$WORK/display"
Xvfb -displayfd 3 -screen 0 1280x720x24 -nolisten tcp >"$WORK/xvfb.log" 2>&1 &
XVFB_PID=$!
exec 3>&-
PIDS+=("$XVFB_PID")
for _ in $(seq 100); do
    [ -s "$WORK/display" ] && break
    kill -0 "$XVFB_PID" 2>/dev/null || { cat "$WORK/xvfb.log" >&2; exit 2; }
    sleep 0.1
done
DISPLAY_NUM=$(head -n 1 "$WORK/display")
[ -n "$DISPLAY_NUM" ] || { echo "check: Xvfb gave no display" >&2; exit 2; }
say "Xvfb on :$DISPLAY_NUM (pid $XVFB_PID)"

# 3. OBS with a throw-away config: profile and scene collection "Steno", websocket enabled.
OBS_VERSION=$(obs --version 2>/dev/null | sed -n 's/.* \([0-9][0-9]*\)\.\([0-9][0-9]*\)\.\([0-9][0-9]*\).*/\1 \2 \3/p' | head -n 1)
read -r vmaj vmin vpatch <<<"${OBS_VERSION:-29 0 0}"
OBS_VERSION_INT=$(((vmaj << 24) | (vmin << 16) | vpatch))
OBSCFG="$WORK/home/.config/obs-studio"
mkdir -p "$OBSCFG/basic/profiles/Steno" "$OBSCFG/basic/scenes"
fill "$HERE/obs/global.ini.in" >"$OBSCFG/global.ini"
fill "$HERE/obs/basic.ini.in" >"$OBSCFG/basic/profiles/Steno/basic.ini"
fill "$HERE/obs/service.json.in" >"$OBSCFG/basic/profiles/Steno/service.json"
cp "$HERE/obs/Steno.json" "$OBSCFG/basic/scenes/Steno.json"
chmod 600 "$OBSCFG/global.ini"
OBS_FLAGS=(--multi --startstreaming --disable-missing-files-check --profile Steno --collection Steno --scene Scene)
obs --help 2>&1 | grep -q -- --disable-shutdown-check && OBS_FLAGS+=(--disable-shutdown-check)
(
    cd "$WORK"
    exec env -u WAYLAND_DISPLAY -u DBUS_SESSION_BUS_ADDRESS -u SESSION_MANAGER \
        HOME="$WORK/home" XDG_CONFIG_HOME="$WORK/home/.config" XDG_DATA_HOME="$WORK/home/.local/share" \
        XDG_CACHE_HOME="$WORK/home/.cache" XDG_RUNTIME_DIR="$WORK/run" \
        DISPLAY=":$DISPLAY_NUM" QT_QPA_PLATFORM=xcb LIBGL_ALWAYS_SOFTWARE=1 \
        obs "${OBS_FLAGS[@]}"
) >"$WORK/obs.log" 2>&1 &
OBS_PID=$!
PIDS+=("$OBS_PID")
say "OBS ${OBS_VERSION// /.} started (pid $OBS_PID, log $WORK/obs.log)"
wait_port "$WS_PORT" 60 "$OBS_PID" OBS "$WORK/obs.log"
if ! obs_ws wait-active --timeout 60 >"$WORK/stream-start.jsonl"; then
    echo "check: OBS did not start streaming:" >&2
    cat "$WORK/stream-start.jsonl" >&2
    grep -iE 'rtmp|stream|error' "$WORK/obs.log" | tail -n 20 >&2
    exit 2
fi
say "OBS streams to rtmp://127.0.0.1:$RTMP_PORT/live; obs-websocket at $OBS_URL"

# 4. The feeder.
FEEDER_TIMEOUT=${FEEDER_TIMEOUT:-120}
if [ -n "${FEEDER:-}" ]; then
    EXPECTED=${EXPECTED:-}
    feeder=(bash -c "$FEEDER")
    say "feeder: $FEEDER"
else
    EXPECTED=${EXPECTED:-$HERE/sentences.txt}
    feeder=(python3 "$HERE/obs_send_captions.py" captions --wait-active 30 --interval "${INTERVAL:-3}" --file "$HERE/sentences.txt")
    say "feeder: obs_send_captions.py, $(grep -c . "$HERE/sentences.txt") captions ${INTERVAL:-3} s apart"
fi
timeout -k 5 "$FEEDER_TIMEOUT" "${feeder[@]}" > >(tee "$WORK/feeder.out") 2> >(tee "$WORK/feeder.err" >&2) &
FEEDER_PID=$!
feeder_status=0
wait "$FEEDER_PID" || feeder_status=$?
FEEDER_PID=
if [ "$feeder_status" = 124 ]; then
    say "the feeder was stopped after $FEEDER_TIMEOUT s"
    feeder_status=0
else
    say "the feeder ended (status $feeder_status)"
fi
sleep 2 # a few more frames after the last caption

# 5. Stop streaming, then OBS (SIGINT closes its main window cleanly), nginx, Xvfb.
obs_ws stop-stream --timeout 20 >"$WORK/stream-stop.jsonl" || say "StopStream failed: $(cat "$WORK/stream-stop.jsonl")"
kill -INT "$OBS_PID" 2>/dev/null || true
for _ in $(seq 200); do kill -0 "$OBS_PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$OBS_PID" 2>/dev/null && { say "OBS did not quit on SIGINT; killing it"; kill -9 "$OBS_PID"; }
wait "$OBS_PID" 2>/dev/null || true
kill -QUIT "$NGINX_PID" 2>/dev/null || true
wait "$NGINX_PID" 2>/dev/null || true
kill "$XVFB_PID" 2>/dev/null || true
wait "$XVFB_PID" 2>/dev/null || true
PIDS=()
say "OBS, nginx and Xvfb stopped"

# 6. Read the captions back out of the recording.
REC="$WORK/rec/$STREAM_KEY.flv"
[ -s "$REC" ] || { echo "check: nothing was recorded ($REC)" >&2; exit 1; }
cd "$WORK"
ffprobe -hide_banner "rec/$STREAM_KEY.flv" 2>&1 | grep -E 'Duration|Stream' | sed 's/^/  /'
extract() { # extract FLV SRT: ffmpeg's CEA-608 decoder over the video's A53 side data
    ffmpeg -hide_banner -nostdin -loglevel error -y -f lavfi -i "movie=$1[out0+subcc]" -map 0:s -c:s srt "$2"
}
extract "rec/$STREAM_KEY.flv" raw.srt
raw_count=$(grep -c -- '-->' raw.srt || true)
if [ "$raw_count" = 0 ]; then
    say "ffmpeg on the recording as it is: no captions (OBS puts the caption SEI after the frame's slice, where FFmpeg's h264 decoder drops it as a late SEI)"
else
    say "ffmpeg on the recording as it is: $raw_count captions"
fi
python3 "$HERE/flv_sei_fix.py" "rec/$STREAM_KEY.flv" fixed.flv >sei.json
extract fixed.flv captions.srt
say "caption SEIs in the stream: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["captionSei"], "at", d["captionSeiTimesMs"], "ms")' sei.json)"
echo "---- captions.srt (ffmpeg, after moving the SEIs before the slices) ----"
cat captions.srt
echo "----"

result=0
python3 - "$WORK/captions.srt" "${EXPECTED:-}" "${MIN_WORDS:-0.8}" <<'EOF' || result=$?
import collections, re, sys
srt, expected_file, min_words = sys.argv[1], sys.argv[2], float(sys.argv[3])
cues = []
for block in re.split(r"\n\s*\n", open(srt, encoding="utf-8").read().strip()):
    lines = block.splitlines()
    if len(lines) >= 3 and "-->" in lines[1]:
        text = re.sub(r"<[^>]*>|\{[^}]*\}", "", "\n".join(lines[2:]))
        cues.append((lines[1], text))
words = lambda s: re.findall(r"[a-z0-9']+", s.lower())
got = collections.Counter(w for _, t in cues for w in words(t))
print(f"captions decoded: {len(cues)}, words: {sum(got.values())}")
if not cues:
    print("FAIL: no captions came through")
    sys.exit(1)
if not expected_file:
    print("PASS: captions came through (no expected sentences given)")
    sys.exit(0)
sentences = [l.rstrip("\n").replace("\\n", "\n") for l in open(expected_file, encoding="utf-8") if l.strip()]
sent = collections.Counter(w for s in sentences for w in words(s))
found = sum(min(n, got[w]) for w, n in sent.items())
cue_texts = [" ".join(words(t)) for _, t in cues]
for s in sentences:
    mark = "ok  " if " ".join(words(s)) in cue_texts else "MISS"
    print(f"  {mark} {s!r}")
ratio = found / max(1, sum(sent.values()))
print(f"words found / words sent: {found}/{sum(sent.values())} ({ratio:.0%}); exact captions: "
      f"{sum(' '.join(words(s)) in cue_texts for s in sentences)}/{len(sentences)}")
if ratio < min_words:
    print(f"FAIL: fewer than {min_words:.0%} of the words came through")
    sys.exit(1)
print("PASS")
EOF
say "done"
if [ "$feeder_status" != 0 ]; then
    echo "check: the feeder failed (status $feeder_status)" >&2
    exit 1
fi
exit $result
