#!/bin/sh
# AddressSanitizer run (`make sanitize`, issue 26): builds the tests with `--sanitize=address`
# into a build folder of their own and runs the stress suites under it: the shared decoders
# lent and given back under load (PoolStress, DecoderTurns, DecoderPoolLine, AbandonedUtterance),
# the worker pool, the transport, the in-memory session service, and the protocol fuzzer. Not
# part of `make test`: the build is a second full one.
#
#   scripts/asan.sh                              the default suites (below)
#   scripts/asan.sh 'PoolStress|WorkerPoolTests'
#   SCRATCH=/tmp/asan-build scripts/asan.sh      where the instrumented build goes
#
# Exits 1 if a test fails or ASan reports anything (it stops the test process at its first
# report); the whole log is in $SCRATCH/asan.log.
set -eu
cd "$(dirname "$0")/.."

SCRATCH=${SCRATCH:-/tmp/asan-build}
FILTER=${1:-'PoolStress|DecoderTurns|DecoderPoolLine|AbandonedUtterance|SpeechParts|StenoWorkersTests|StenoSessionTests|StenoTransportTests|SessionServiceTests|EngineFailureTests|ServerFuzzTests|FrameConformanceTests'}
LOG=$SCRATCH/asan.log

swift build --build-tests --sanitize=address --scratch-path "$SCRATCH"
mkdir -p "$SCRATCH"
status=0
# Leaks are left to the soak (pocketsphinx and lws keep process-wide tables on purpose).
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:abort_on_error=0} \
    swift test --skip-build --sanitize=address --scratch-path "$SCRATCH" --filter "$FILTER" >"$LOG" 2>&1 || status=$?
reports=$(grep -c "ERROR: AddressSanitizer" "$LOG" || true)
summary=$(grep -E "Test run with|passed after|failed after" "$LOG" | tail -n 1)
echo "asan: $summary; $reports AddressSanitizer report(s); log in $LOG"
[ "$status" -eq 0 ] && [ "$reports" -eq 0 ]
