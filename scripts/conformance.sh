#!/bin/sh
# RFC 6455 conformance: Autobahn|Testsuite's fuzzing client against `steno-bench echo-server`,
# Steno's server with its test-only echo route: the real transport with an echo behind it
# (issue 12). Not part of `make test`: Autobahn runs
# only on Python 2.7, which Debian 12 does not have (pyenv's 2.7.18 here), and it fetches
# autobahntestsuite from PyPI into a virtualenv of its own the first time.
#
#   scripts/conformance.sh                  sections 1-10 (Autobahn has no section 8; 11-13 are
#                                           compression, which Steno does not offer)
#   CASES='1.*,5.*' scripts/conformance.sh  some of them
#
# Writes the HTML reports to .build/autobahn/report/ and prints a table of the results by
# section (what docs/reliability.md shows). Exits 1 if any case is FAILED.
set -eu
cd "$(dirname "$0")/.."

CASES=${CASES:-1.*,2.*,3.*,4.*,5.*,6.*,7.*,9.*,10.*}
PY2=${PY2:-$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")/versions/2.7.18/bin/python}
OUT=${OUT:-.build/autobahn}
VENV=${VENV:-$OUT/venv}
BENCH=${BENCH:-.build/debug/steno-bench}
case $VENV in /*) ;; *) VENV=$PWD/$VENV ;; esac

if [ ! -x "$VENV/bin/wstest" ]; then
    [ -x "$PY2" ] || { echo "conformance: no Python 2.7 at $PY2 (set PY2)" >&2; exit 2; }
    "$PY2" -m pip install --user --quiet 'virtualenv<20.22'
    "$PY2" -m virtualenv --quiet "$VENV"
    "$VENV/bin/pip" install --quiet autobahntestsuite
fi
. scripts/lib.sh
# Messages of up to 16 MB (section 9), queues that hold them, nothing that would close a
# connection Autobahn keeps quiet on purpose: bench/Sources/steno-bench/BenchServers.swift.
[ -x "$BENCH" ] || swift build --product steno-bench
start_server conformance 30 "$BENCH" echo-server

python3 - "$OUT/spec.json" "$PORT" "$CASES" <<'EOF'
import json, sys
path, port, cases = sys.argv[1], sys.argv[2], sys.argv[3]
json.dump({"outdir": "./report",  # wstest runs in OUT
           "servers": [{"agent": "steno", "url": "ws://127.0.0.1:%s/echo" % port}],
           "cases": cases.split(","), "exclude-cases": [], "exclude-agent-cases": {}},
          open(path, "w"), indent=2)
EOF
(cd "$OUT" && "$VENV/bin/wstest" -m fuzzingclient -s spec.json >wstest.log 2>&1) || {
    tail -n 20 "$OUT/wstest.log" >&2; exit 2; }

python3 - "$OUT/report/index.json" <<'EOF'
import json, sys, collections
results = json.load(open(sys.argv[1]))["steno"]
table = collections.OrderedDict()
def key(case): return [int(p) for p in case.split(".")]
for case in sorted(results, key=key):
    section = case.split(".")[0]
    table.setdefault(section, collections.Counter())[results[case]["behavior"]] += 1
kinds = ["OK", "NON-STRICT", "INFORMATIONAL", "UNIMPLEMENTED", "FAILED"]
print("| section | cases | " + " | ".join(kinds) + " |")
print("|---|---|" + "---|" * len(kinds))
for section, counts in table.items():
    print("| %s | %d | %s |" % (section, sum(counts.values()), " | ".join(str(counts.get(k, 0)) for k in kinds)))
failed = sorted((c for c in results if results[c]["behavior"] == "FAILED"), key=key)
closes = sorted((c for c in results if results[c]["behaviorClose"] not in ("OK", "INFORMATIONAL")), key=key)
if failed: print("\nFAILED: " + ", ".join(failed))
if closes: print("close not OK: " + ", ".join("%s (%s)" % (c, results[c]["behaviorClose"]) for c in closes))
sys.exit(1 if failed else 0)
EOF
