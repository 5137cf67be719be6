"""steno-client.js against the real server, in chromium and in Node, through the shared
scenarios of client_scenarios.mjs."""

from __future__ import annotations

import base64
import json
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import HERE, SPEECH_WAV, node_env
from wordmatch import assert_similar

WAIT_MS = 180_000  # guards against hangs only
SCENARIOS = (HERE / "client_scenarios.mjs").read_text(encoding="utf-8")


def admitting(server, timeout: float = 60):
    """Waits until the server admits new sessions (/readyz 200): a file just streamed as fast as
    the server takes it measures as a busy talker for a moment, and the next scenario's
    handshake would be refused (503) instead of testing what it tests."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{server.http}/readyz", timeout=5) as response:
                if response.status == 200:
                    return
        except urllib.error.HTTPError:
            pass
        assert time.monotonic() < deadline, "the server did not admit new sessions again"
        time.sleep(0.2)


def run_in_browser(browser, server, scenario: str, with_wav: bool) -> dict:
    admitting(server)
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    # The scenarios are test code: serve them on the server's origin without adding them to web-client/.
    page.route("**/__tests__/client_scenarios.mjs",
               lambda route: route.fulfill(status=200, body=SCENARIOS, content_type="text/javascript"))
    page.goto(f"{server.http}/")
    wav = base64.b64encode(SPEECH_WAV.read_bytes()).decode() if with_wav else None
    page.set_default_timeout(WAIT_MS)
    summary = page.evaluate(
        """async ([name, url, wav]) => {
             const { StenoClient } = await import('/steno-client.js');
             const scenarios = await import('/__tests__/client_scenarios.mjs');
             const bytes = wav ? Uint8Array.from(atob(wav), (c) => c.charCodeAt(0)) : null;
             return scenarios[name](StenoClient, url, bytes);
           }""",
        [scenario, server.ws, wav],
    )
    assert not problems, problems
    return summary


def run_in_node(node, server, scenario: str, with_wav: bool) -> dict:
    admitting(server)
    args = node.command(str(HERE / "client_node.mjs"), scenario, server.ws)
    if with_wav:
        args.append(str(SPEECH_WAV))
    result = subprocess.run(args, capture_output=True, text=True, timeout=WAIT_MS / 1000, env=node_env())
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def check_stream(summary: dict, reference: list[str]):
    assert summary["ready"]["type"] == "ready" and summary["ready"].get("session")
    assert summary["stateAfterReady"] == "ready"
    wav_seconds = summary["wavSeconds"]
    assert abs(summary["sentSeconds"] - wav_seconds) < 0.001, "the client must send every sample once"
    # The timeline counts samples: everything sent before `finalize` is final through its end.
    assert summary["finalized"]["type"] == "finalized"
    assert abs(summary["finalized"]["through"] - wav_seconds) < 0.05
    assert summary["ended"]["type"] == "ended"
    assert abs(summary["ended"]["duration"] - wav_seconds) < 0.05
    assert summary["closed"] == {"code": 1000, "wasClean": True, "error": None}
    assert summary["stateAtEnd"] == "closed"

    events = summary["events"]
    assert summary["iteratorError"] is None
    assert summary["iteratorEvents"] == [{"type": e["type"], "seq": e["seq"]} for e in events], \
        "the async iterator and the callbacks must see the same events"
    seqs = [e["seq"] for e in events]
    assert seqs[0] == 1 and all(b > a for a, b in zip(seqs, seqs[1:])), f"seq must increase: {seqs}"
    types = [e["type"] for e in events]
    assert types[-1] == "ended" and types.index("finalized") < types.index("ended")
    bad = [e for e in events if e["type"] == "error"]
    assert not bad, f"the server reported errors (odd-sized pieces must be re-cut into whole samples): {bad}"

    finals = summary["finals"]
    assert finals, "no finals"
    for a, b in zip(finals, finals[1:]):
        assert b["start"] >= a["end"] - 0.001, f"finals overlap: {a} {b}"
    for f in finals:
        assert f["start"] <= f["end"] <= wav_seconds + 0.05
    # The very same samples as `steno transcribe`: the words should agree closely.
    assert_similar(reference, [f["text"] for f in finals], min_f1=0.8)


def check_unsupported(summary: dict):
    assert summary["accepted"] is None, "a PCM rate of 1234 Hz must be refused"
    assert summary["rejected"]["name"] == "StenoError"
    assert summary["rejected"]["code"] == "unsupported_audio"
    assert summary["rejected"]["closeCode"] == 1003
    assert summary["closed"]["code"] == 1003
    assert {"type": "error", "code": "unsupported_audio", "fatal": True} in summary["events"]
    assert summary["iteratorError"]["code"] == "unsupported_audio"
    assert summary["afterClose"]["code"] == "unsupported_audio", "calls after the close reject with the cause"


def check_cancel(summary: dict):
    assert summary["session"]
    assert summary["cancelled"]["type"] == "cancelled"
    assert isinstance(summary["cancelled"]["through"], (int, float))
    assert summary["types"][-1] == "cancelled", "nothing but cancelled after cancel"
    assert summary["closed"] == {"code": 1000, "error": None}
    assert summary["iteratorError"] is None


def test_client_in_browser(server, reference, launch_browser):
    browser = launch_browser()
    check_stream(run_in_browser(browser, server, "streamFile", True), reference)
    check_unsupported(run_in_browser(browser, server, "unsupportedAudio", False))
    check_cancel(run_in_browser(browser, server, "cancelSession", True))


def test_client_in_node(server, reference, node):
    # The WebSocket is Node's own where it has one (Node 22+, or 20 with the flag), else
    # Debian's node-ws (Node 18, Debian 12's): node.websocket says which.
    check_stream(run_in_node(node, server, "streamFile", True), reference)
    check_unsupported(run_in_node(node, server, "unsupportedAudio", False))
    check_cancel(run_in_node(node, server, "cancelSession", True))
