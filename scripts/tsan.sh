#!/bin/sh
# ThreadSanitizer run (issue 12): builds the tests with `--sanitize=thread` into a build folder of
# their own and runs suites under it. Not part of `make test`: the build is a second full one
# (10+ minutes on two busy cores) and the suites run several times slower under TSan.
#
#   scripts/tsan.sh                               the default suites (below)
#   scripts/tsan.sh 'WorkerPoolTests|TransportMessagingTests'
#   SCRATCH=/tmp/tsan-build scripts/tsan.sh       where the instrumented build goes
#
# Exits 1 if a test fails or TSan reports a race it can judge (below); the whole log
# is in $SCRATCH/tsan.log. What TSan can and cannot see here: docs/reliability.md, "Sanitizers".
set -eu
cd "$(dirname "$0")/.."

SCRATCH=${SCRATCH:-/tmp/tsan-build}
FILTER=${1:-'StenoWorkersTests|StenoTransportTests|WriteStallTests|ServerBackpressureTests|FrameConformanceTests|ServerRobustnessTests|ServerShutdownTests|ServerResumeTests|ServerChannelTests|SessionServiceTests|ServerFuzzTests'}
LOG=$SCRATCH/tsan.log

swift build --build-tests --sanitize=thread --scratch-path "$SCRATCH"
mkdir -p "$SCRATCH"
# halt_on_error=0: report every race, not just the first; the exit code says whether any was.
status=0
TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1} \
    swift test --skip-build --sanitize=thread --scratch-path "$SCRATCH" --filter "$FILTER" >"$LOG" 2>&1 || status=$?
# Swift's Synchronization.Mutex is invisible to TSan on Linux (a futex in the uninstrumented
# standard library), so every access it protects is reported as a race (docs/reliability.md).
# Such reports, with both accesses inside a `withLock` body (a closure taking `inout sending
# T`, mangled `zYuYTXE`, among the top frames of each stack), are counted apart; any other
# report fails the run.
others=$(python3 - "$LOG" <<'EOF'
import re, sys, collections
text = open(sys.argv[1], errors="replace").read()
reports = text.split("WARNING: ThreadSanitizer:")[1:]
inside, other = 0, collections.Counter()
for r in reports:
    r = r.split("==================")[0]
    stacks = [s for s in r.split("\n\n") if "#0" in s][:2]
    tops = [re.findall(r"#\d+ (\S+) (\S+)", s)[:4] for s in stacks]
    if len(tops) == 2 and all(any("zYuYTXE" in f[0] for f in top) for top in tops):
        inside += 1
        continue
    other[(r.split("(")[0].strip(), " | ".join(top[0][1].split("/")[-1] if top else "?" for top in tops))] += 1
print("tsan: %d reports, %d of them with both accesses inside Mutex.withLock" % (len(reports), inside), file=sys.stderr)
for (kind, where), n in other.most_common():
    print("tsan:   %d x %s: %s" % (n, kind, where), file=sys.stderr)
print(sum(other.values()))
EOF
)
grep -E '^(✔|✘) (Suite|Test run)' "$LOG" || true
echo "tsan: $others reports outside a Mutex; tests exit status $status; log: $LOG"
[ "$status" -eq 0 ] && [ "$others" -eq 0 ]
