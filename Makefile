# Steno: the two commands of the README, plus benchmarks.
#   make run    install what is missing, build, start the server with the English model and the web client
#   make test   install what is missing, build, run every test (Swift suites, the Whisper worker's, the browser test,
#               then the broadcast check: a real OBS putting Steno's captions into its stream)
#   make broadcast-check  the broadcast check alone (scripts/broadcast/), after a debug build
#   make bench  build in release mode and print the benchmark tables
#   make conformance  Autobahn|Testsuite against the real transport (needs Python 2.7; not in make test)
#   make sanitize  AddressSanitizer and ThreadSanitizer over the stress suites (two instrumented builds)
#   make soak   10 minutes of sessions and viewers churning against a release server: memory and descriptors flat

HOST ?= 127.0.0.1
PORT ?= 8080
SWIFT ?= swift

.PHONY: run test bench conformance sanitize soak build clean broadcast-check

run:
	scripts/bootstrap.sh run
	$(SWIFT) build -c release --product steno
	.build/release/steno serve --host $(HOST) --port $(PORT) --web-root web-client

test:
	scripts/bootstrap.sh test
	.venv/bin/python scripts/machine_report.py
	$(SWIFT) build --build-tests
	$(SWIFT) test
	scripts/whisper-test.sh
	scripts/interop-test.sh
	scripts/browser-test.sh
	python3 scripts/fakes/test_fakes.py
	scripts/broadcast/steno-check.sh

broadcast-check:
	scripts/bootstrap.sh test
	$(SWIFT) build --product steno
	scripts/broadcast/steno-check.sh

bench:
	scripts/bootstrap.sh test
	$(SWIFT) build -c release --product steno
	$(SWIFT) build -c release --product steno-bench
	.build/release/steno-bench all

sanitize:
	scripts/bootstrap.sh test
	scripts/asan.sh
	scripts/tsan.sh

soak:
	scripts/bootstrap.sh test
	$(SWIFT) build -c release --product steno
	STENO=.build/release/steno MINUTES=$${MINUTES:-10} scripts/soak.sh

conformance:
	$(SWIFT) build --product steno-bench
	scripts/conformance.sh

build:
	$(SWIFT) build

clean:
	rm -rf .build
