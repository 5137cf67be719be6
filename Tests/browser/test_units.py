"""Unit tests of steno-client.js and transcript.js in Node (no server, no browser)."""

import subprocess

from conftest import HERE, node_env


def test_web_client_units(node):
    result = subprocess.run([node.path, "--test", str(HERE / "unit_test.mjs")],
                            capture_output=True, text=True, timeout=300, env=node_env())
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
