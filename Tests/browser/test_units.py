"""Unit tests of steno-client.js and transcript.js in Node (no server, no browser)."""

import subprocess

from conftest import HERE


def test_web_client_units(node_path):
    result = subprocess.run([node_path, "--test", str(HERE / "unit_test.mjs")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
