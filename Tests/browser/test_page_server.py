"""The captioning page when the server cannot take it, against real servers: full
(--max-sessions reached), restarting (SIGTERM, then a new server on the same port) and
refusing the token. The page learns why from a plain GET of the stream address, says so,
keeps the microphone's audio meanwhile and sends it once admitted; a refused token stops it."""

from __future__ import annotations

import wave

from conftest import SPEECH_WAV, free_port
from test_page import open_page
from wordmatch import assert_similar

WAIT_MS = 120_000  # guards against hangs only

with wave.open(str(SPEECH_WAV)) as _w:
    WAV_SECONDS = _w.getnframes() / _w.getframerate()


def own_problems(problems: list[str]) -> list[str]:
    """Console errors and exceptions of the page, less the browser's own reports of the
    refusals these tests cause (a handshake refused with 503 or 401, the probe's answer)."""
    network = ("WebSocket connection to", "Failed to load resource")
    return [p for p in problems if not (p.startswith("console error:") and any(n in p for n in network))]


def received(page, kind: str) -> list[dict]:
    return page.evaluate(f"window.__probe.received.filter((m) => m.type === {kind!r})")


def finish(page) -> dict:
    """Waits until the page has captured the whole file, then End; what the page showed."""
    page.wait_for_function(
        f"Number(document.getElementById('audio-time').dataset.seconds) >= {WAV_SECONDS + 0.5}", timeout=WAIT_MS)
    page.click("#end")
    page.wait_for_selector("#status[data-state=ended]", timeout=WAIT_MS)
    return {
        "finals": page.eval_on_selector_all("#finals .final", "els => els.map(e => e.textContent.trim())"),
        "ended": received(page, "ended")[-1],
        "notice": page.text_content("#error").strip(),
    }


def test_page_when_the_server_is_full_restarting_or_refusing(make_server, reference, launch_browser, artifacts):
    """Three pages side by side, each with its own server, to wait for the file's real-time
    playback once, not three times: a full server, a restarting one, a refused token."""
    # The holder of the full server's one session sends no audio: --idle-timeout 0 keeps it
    # until the test ends it (on a slow machine the restart below outlasts the 30 s default).
    full_server = make_server("--max-sessions", "1", "--idle-timeout", "0")
    port = free_port()
    first = make_server(port=port)
    token_server = make_server("--token", "right-token")
    browser = launch_browser(SPEECH_WAV)

    # Full: someone else has the only session when the page starts.
    holder = browser.new_page()
    holder.goto(f"{full_server.http}/view.html")
    holder.evaluate("""async (url) => {
      const { StenoClient } = await import('/steno-client.js');
      window.__held = await StenoClient.connect(url, {});
    }""", full_server.ws)
    full, full_problems = open_page(browser, full_server, "", {"width": 1024, "height": 800})
    restart, restart_problems = open_page(browser, first, "?encoding=pcm", {"width": 1024, "height": 800})
    refused, refused_problems = open_page(browser, token_server, "?token=wrong-token", {"width": 800, "height": 700})
    for page in (full, restart, refused):
        page.click("#start")

    # Refused token: said plainly, no retry, the microphone off again.
    refused.wait_for_selector("#status[data-state=error]", timeout=WAIT_MS)
    notice = refused.text_content("#error")
    assert "refused the access token" in notice, notice

    full.wait_for_selector("#status[data-state=waiting][data-reason=full]", timeout=WAIT_MS)
    notice = full.text_content("#error")
    assert "The server is at capacity; retrying in" in notice, notice

    # Restarting: 3 s into the file, mid-way through its first sentence (1.0-6.6 s; the second
    # is 8.1-10.6 s), SIGTERM (the server finalizes, sends shutting_down, closes with 1001 and
    # exits); then a new server on the same port, which must hear the rest. Cut by the audio
    # captured, not by the first final: on a loaded machine that final came after the second
    # sentence had reached the old server, and the new one had nothing left to caption.
    restart.wait_for_selector("#status[data-state=listening]", timeout=WAIT_MS)
    restart.wait_for_function("Number(document.getElementById('audio-time').dataset.seconds) >= 3", timeout=WAIT_MS)
    assert first.stop() == 0
    restart.wait_for_selector("#status[data-reason=restarting]", timeout=WAIT_MS)
    notice = restart.text_content("#error")
    assert "The server is restarting" in notice, notice
    restart.screenshot(path=str(artifacts / "page-server-restarting.png"), full_page=True)
    assert restart.is_enabled("#end") and restart.is_disabled("#start"), "the microphone stays on"
    make_server(port=port)

    # Full, still: it keeps trying past the first Retry-After (5 s), holding what the microphone hears.
    full.wait_for_function("window.__probe.urls.length >= 2", timeout=WAIT_MS)
    full.wait_for_selector("#status[data-state=waiting][data-reason=full]", timeout=WAIT_MS)
    held = float(full.get_attribute("#buffered", "data-held-seconds"))
    assert held > 1, f"the audio captured while waiting is not kept ({held} s)"
    assert not received(full, "ready"), "admitted to a full server?"
    full.screenshot(path=str(artifacts / "page-server-full.png"), full_page=True)
    holder.evaluate("window.__held.end()")
    full.wait_for_selector("#status[data-state=listening]", timeout=WAIT_MS)

    restart.wait_for_function("window.__probe.received.filter((m) => m.type === 'ready').length === 2", timeout=WAIT_MS)
    restart.wait_for_selector("#status[data-state=listening]", timeout=WAIT_MS)

    assert refused.evaluate("window.__probe.urls.length") == 1, "a refused token must not be retried"
    assert refused.is_enabled("#start") and refused.is_disabled("#stop"), "the microphone is off again"
    assert not own_problems(refused_problems), "\n".join(refused_problems)

    # Full, admitted: everything the microphone captured reached the session, the audio held
    # while waiting first, then the rest live.
    result = finish(full)
    assert len(received(full, "ready")) == 1
    assert result["ended"]["duration"] >= WAV_SECONDS - 0.3, result["ended"]
    assert_similar(reference, result["finals"], min_f1=0.6)
    assert result["notice"] == "", f"the page still shows: {result['notice']}"
    assert not own_problems(full_problems), "\n".join(full_problems)

    # Restarted: the new server captioned what was said after the old one went.
    result = finish(restart)
    probe = restart.evaluate("window.__probe")
    assert 1001 in probe["closes"], probe["closes"]
    assert any(m["type"] == "error" and m["code"] == "shutting_down" for m in probe["received"])
    second_ready = [i for i, m in enumerate(probe["received"]) if m["type"] == "ready"][1]
    assert any(m["type"] == "final" and m["text"].strip() for m in probe["received"][second_ready:]), \
        "the new server captioned nothing"
    assert_similar(reference, result["finals"], min_f1=0.6)
    assert result["notice"] == "", f"the page still shows: {result['notice']}"
    assert not own_problems(restart_problems), "\n".join(restart_problems)
