"""Unit tests of the web client (steno-client.js, transcript.js, page.js) in Node, without a
server or a browser: each Tests/browser/unit_*.test.mjs run with `node --test`."""

import re
import subprocess

import pytest

from conftest import HERE, node_env

# The unit test files, by subject (what they share is in unit_helpers.mjs). A file named here
# that is missing fails, and so does a unit_*.test.mjs that is not named here.
UNIT_FILES = (
    "unit_client.test.mjs",      # StenoClient: start message, audio framing, promises, events, errors
    "unit_protocol.test.mjs",    # addresses, close codes, Opus durations, models, probeStream, page.js
    "unit_viewer.test.mjs",      # StenoViewer
    "unit_publisher.test.mjs",   # StenoPublisher without resume
    "unit_resume.test.mjs",      # resume: a resuming StenoClient, a publisher resuming after a drop
    "unit_silence.test.mjs",     # SilenceSuppressor, SilenceGate, silence()
    "unit_transcript.test.mjs",  # transcript.js
)

# node's summary lines: "# tests 14" (TAP: Node 18 to 22 when not on a terminal) or
# "ℹ tests 14" (spec: Node 23 and later).
SUMMARY = re.compile(r"^(?:#|ℹ) (tests|pass|fail) (\d+)\s*$", re.M)


def reported_as_a_test(path, stdout):
    """Whether node reported the file itself as a test ("ok 1 - /…/unit_x.test.mjs"), as
    Node 18 and 20 do for a file that defines no test: "# tests 1" then means none ran."""
    line = re.compile(r"^(?:(?:not )?ok \d+ - |[✔✖] )" + re.escape(str(path)) + r"(?: |$)", re.M)
    return line.search(stdout) is not None


def test_every_unit_file_is_run():
    assert sorted(p.name for p in HERE.glob("unit_*.test.mjs")) == sorted(UNIT_FILES)


@pytest.mark.parametrize("name", UNIT_FILES)
def test_web_client_units(node, name):
    path = HERE / name
    assert path.is_file(), f"{path} is missing"
    result = subprocess.run([node.path, "--test", str(path)],
                            capture_output=True, text=True, timeout=300, env=node_env())
    output = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, output
    counts = {key: int(value) for key, value in SUMMARY.findall(result.stdout)}
    ran = counts.get("tests", 0) > 0 and not reported_as_a_test(path, result.stdout)
    assert ran, f"{name} ran no tests\n{output}"
    assert counts.get("pass") == counts["tests"] and counts.get("fail") == 0, output
