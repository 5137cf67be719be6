"""The viewer page (view.html) in headless chromium against the real server: a page that
follows a broadcast channel before anyone publishes to it shows the publisher's finals and
its volatile line (replaced in place), starts a new section for a second broadcast, and a
page opened after the broadcast shows the same finals from the backfill, once each. The
publisher is steno-client.js in another page, streaming the test file's own samples."""

from __future__ import annotations

import base64
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import HERE, SPEECH_WAV, check_paragraphs, free_port
from wordmatch import assert_similar

WAIT_MS = 180_000  # guards against hangs only
SCENARIOS = (HERE / "client_scenarios.mjs").read_text(encoding="utf-8")
CHANNEL = "viewer-test.1"

# Watches the viewer page: what crossed its WebSockets, the states the status went through,
# the volatile texts shown, and whether there was ever more than one volatile line.
PROBE = r"""
(() => {
  const probe = window.__probe = { urls: [], received: [], states: [], volatileShown: [], maxVolatileElements: 0 };
  const Native = window.WebSocket;
  window.WebSocket = class extends Native {
    constructor(...args) {
      super(...args);
      probe.urls.push(String(args[0]));
      this.addEventListener('message', (event) => {
        if (typeof event.data === 'string') probe.received.push(JSON.parse(event.data));
      });
    }
  };
  new MutationObserver(() => {
    const status = document.getElementById('viewer-status');
    const state = status && status.dataset.state;
    if (state && state !== probe.states[probe.states.length - 1]) probe.states.push(state);
    probe.maxVolatileElements = Math.max(probe.maxVolatileElements, document.querySelectorAll('.volatile').length);
    const line = document.getElementById('viewer-volatile');
    const text = line ? line.textContent : '';
    if (text && text !== probe.volatileShown[probe.volatileShown.length - 1]) probe.volatileShown.push(text);
  }).observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
})();
"""

TIME_RANGE = re.compile(r"^\d+:\d\d\.\d\d – \d+:\d\d\.\d\d")


def open_viewer(browser, server, query: str, viewport: dict):
    page = browser.new_page(viewport=viewport)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.add_init_script(PROBE)
    page.set_default_timeout(WAIT_MS)
    page.goto(f"{server.http}/view.html{query}")
    return page, problems


def publish(browser, server, longer_pause: float = 0) -> dict:
    page = browser.new_page()
    page.route("**/__tests__/client_scenarios.mjs",
               lambda route: route.fulfill(status=200, body=SCENARIOS, content_type="text/javascript"))
    page.goto(f"{server.http}/")
    page.set_default_timeout(WAIT_MS)
    wav = base64.b64encode(SPEECH_WAV.read_bytes()).decode()
    summary = page.evaluate(
        """async ([url, wav, channel, longerPause]) => {
             const { StenoClient } = await import('/steno-client.js');
             const { publishFile } = await import('/__tests__/client_scenarios.mjs');
             const bytes = Uint8Array.from(atob(wav), (c) => c.charCodeAt(0));
             return publishFile(StenoClient, url, bytes, channel, 2, longerPause);
           }""",
        [server.ws, wav, CHANNEL, longer_pause],
    )
    page.close()
    assert not summary["errors"], summary["errors"]
    assert summary["finals"], "the publisher got no finals"
    return summary


def shown_finals(page, broadcast: int) -> list[dict]:
    return page.evaluate(
        """(n) => [...document.querySelectorAll(`section.broadcast[data-broadcast="${n}"] .final`)]
               .map((el) => ({ text: el.textContent.trim(), title: el.title,
                               start: Number(el.dataset.start), end: Number(el.dataset.end) }))""",
        broadcast,
    )


def check_finals(shown: list[dict], published: list[dict]):
    # The very events the publisher got, in order, each once, with its time range on hover.
    assert [f["text"] for f in shown] == [f["text"].strip() for f in published if f["text"].strip()]
    for f, p in zip(shown, [p for p in published if p["text"].strip()]):
        assert abs(f["start"] - p["start"]) < 0.001 and abs(f["end"] - p["end"]) < 0.001
        assert TIME_RANGE.match(f["title"]), f["title"]


def test_viewer_follows_a_broadcast(server, reference, launch_browser, artifacts):
    browser = launch_browser()

    # A viewer that arrives before the publisher waits for it.
    viewer, problems = open_viewer(browser, server, f"?channel={CHANNEL}", {"width": 1280, "height": 800})
    viewer.wait_for_selector("#viewer-status[data-state=waiting]")
    assert "Waiting" in viewer.text_content("#viewer-status")
    assert viewer.text_content("#viewer-channel") == CHANNEL
    assert viewer.title().startswith(CHANNEL)
    probe = viewer.evaluate("window.__probe")
    assert probe["urls"] == [f"ws://127.0.0.1:{server.port}/v1/listen?channel={CHANNEL}"]
    assert [m["type"] for m in probe["received"]] == ["joined"]

    # The first broadcast has a pause of over two seconds between its sentences: a new paragraph.
    first = publish(browser, server, longer_pause=2.5)
    count = len([f for f in first["finals"] if f["text"].strip()])
    viewer.wait_for_function(f"document.querySelectorAll('.final').length >= {count}")
    shown = shown_finals(viewer, 1)
    check_finals(shown, first["finals"])
    paragraphs = check_paragraphs(viewer, 'section.broadcast[data-broadcast="1"]')
    assert len(paragraphs) >= 2, f"the long pause did not start a paragraph: {paragraphs}"
    assert_similar(reference, [f["text"] for f in shown], min_f1=0.8)

    probe = viewer.evaluate("window.__probe")
    assert "live" in probe["states"], f"the status never said Live: {probe['states']}"
    assert probe["volatileShown"], "no volatile line was shown"
    assert probe["maxVolatileElements"] == 1, "the volatile line must be replaced in place, never doubled"
    assert viewer.text_content("#viewer-volatile") == "", "a final replaces the volatile line it covers"
    heading = viewer.text_content("section.broadcast[data-broadcast='1'] .broadcast-heading")
    assert heading.startswith("Broadcast started at")
    # The publisher ended its session: the page says so as soon as the server does (the
    # `publisher` event), not after a quiet spell ('quiet' is another state).
    viewer.wait_for_selector("#viewer-status[data-state=ended]")
    assert viewer.text_content("#viewer-status").startswith("The broadcast ended at")
    states = [m.get("state") for m in viewer.evaluate("window.__probe.received") if m["type"] == "publisher"]
    assert states == ["live", "ended"], states

    # A second broadcast on the same channel: a fresh `joined`, a new section below the first.
    second = publish(browser, server)
    count2 = len([f for f in second["finals"] if f["text"].strip()])
    viewer.wait_for_function(
        f"document.querySelectorAll('section.broadcast[data-broadcast=\"2\"] .final').length >= {count2}")
    check_finals(shown_finals(viewer, 2), second["finals"])
    assert shown_finals(viewer, 1) == shown, "the first broadcast's captions stay as they were"
    assert viewer.text_content("section.broadcast[data-broadcast='2'] .broadcast-heading").startswith("New broadcast")
    # One `joined` on connecting (no publisher yet), one for each publisher that started.
    assert [m["type"] for m in viewer.evaluate("window.__probe.received")].count("joined") == 3
    assert viewer.evaluate("window.__probe.urls.length") == 1, "one connection throughout"

    # Text size and display, remembered by the page.
    before = viewer.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--caption-scale')")
    viewer.click("#viewer-larger")
    after = viewer.evaluate("getComputedStyle(document.documentElement).getPropertyValue('--caption-scale')")
    assert float(after) > float(before or 1)
    assert viewer.text_content("#viewer-font-size") == f"{round(float(after) * 100)}%"
    viewer.select_option("#viewer-theme", "contrast")
    assert viewer.evaluate("document.documentElement.dataset.theme") == "contrast"

    # Downloads come from the server: the channel's latest broadcast.
    href = viewer.get_attribute("#viewer-download-vtt", "href")
    assert href.endswith(f"/v1/channels/{CHANNEL}/captions.vtt")
    response = viewer.request.get(href)
    assert response.status == 200 and response.text().startswith("WEBVTT")
    cue_text = [line for line in response.text().splitlines()[1:] if line and "-->" not in line]
    assert_similar([f["text"] for f in second["finals"]], cue_text, min_f1=0.95)
    viewer.screenshot(path=str(artifacts / "viewer-desktop.png"), full_page=True)
    assert not problems, "\n".join(problems)

    # A viewer who arrives after the broadcast, on a phone: the backfill, each final once.
    late, late_problems = open_viewer(browser, server, f"?channel={CHANNEL}", {"width": 360, "height": 740})
    late.wait_for_function(f"document.querySelectorAll('.final').length >= {count2}")
    late.wait_for_timeout(500)  # nothing more may arrive
    check_finals(shown_finals(late, 1), second["finals"])
    late.wait_for_selector("#viewer-status[data-state=ended]")  # told at once that it is over
    check_paragraphs(late, 'section.broadcast[data-broadcast="1"]')
    assert late.evaluate("document.querySelectorAll('.final').length") == count2
    assert late.evaluate("document.documentElement.scrollWidth") <= 360
    for selector in ("#viewer-status", "#viewer-transcript", "#viewer-larger", "#viewer-download-srt"):
        box = late.locator(selector).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 360, f"{selector} is off screen: {box}"
    late.screenshot(path=str(artifacts / "viewer-360.png"), full_page=True)
    assert not late_problems, "\n".join(late_problems)


def test_viewer_join_form(server, launch_browser):
    browser = launch_browser()
    page, problems = open_viewer(browser, server, "", {"width": 800, "height": 600})
    page.wait_for_selector("#viewer-join:not([hidden])")
    assert page.evaluate("document.activeElement.id") == "viewer-channel-input"
    assert page.is_hidden("#viewer-captions")
    assert page.evaluate("window.__probe.urls") == [], "no connection without a channel"

    page.fill("#viewer-channel-input", "no spaces allowed")
    page.keyboard.press("Enter")
    assert page.is_visible("#viewer-join-error")
    assert "not a channel name" in page.text_content("#viewer-join-error")

    page.fill("#viewer-channel-input", "studio-a")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"view\.html\?channel=studio-a$"))
    page.wait_for_selector("#viewer-status[data-state=waiting]")
    assert page.is_visible("#viewer-captions")
    assert not problems, "\n".join(problems)


def test_publisher_page_shares_a_viewer_link(server, launch_browser):
    browser = launch_browser()
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(f"{server.http}/")
    assert page.is_hidden("#share"), "no link without a channel"
    page.click("details.settings > summary")
    page.fill("#channel", "studio-a")
    assert page.is_visible("#share")
    assert page.text_content("#share-channel") == "studio-a"
    assert page.get_attribute("#viewer-link", "href") == f"{server.http}/view.html?channel=studio-a"
    page.fill("#channel", "not a name")
    assert page.is_hidden("#share")
    assert not problems, "\n".join(problems)


def test_viewer_with_a_refused_token(make_server, launch_browser):
    server = make_server("--token", "publisher-token", "--viewer-token", "viewer-token")
    browser = launch_browser()
    page, problems = open_viewer(browser, server, f"?channel={CHANNEL}&token=wrong", {"width": 800, "height": 600})
    page.wait_for_selector("#viewer-status[data-state=disconnected]")
    assert "refused the access token" in page.text_content("#viewer-notice-text")
    assert page.is_hidden("#viewer-reconnect"), "trying again would be refused again"
    page.wait_for_timeout(1000)
    assert page.evaluate("window.__probe.urls.length") == 1, "a refused token must not be retried"
    # The browser's own reports of the refused handshake and of the answer to the GET that explained it.
    assert not [p for p in problems if "WebSocket connection to" not in p and "Failed to load resource" not in p], problems

    # The right viewer token gets in.
    ok, ok_problems = open_viewer(browser, server, f"?channel={CHANNEL}&token=viewer-token", {"width": 800, "height": 600})
    ok.wait_for_selector("#viewer-status[data-state=waiting]")
    assert not ok_problems, ok_problems


def _redis(port: int) -> subprocess.Popen:
    process = subprocess.Popen(["/usr/bin/redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                "--save", "", "--appendonly", "no"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30  # a hang guard
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                pytest.fail("redis-server did not start")
            time.sleep(0.05)


def test_viewer_on_another_instance_is_told_when_the_link_through_redis_drops(make_server, launch_browser):
    """Two instances sharing channels through a real redis-server: a viewer on the second
    follows a broadcast on the first, and says so when the second's link to Redis drops
    (the `relay` event), until it is back."""
    if not Path("/usr/bin/redis-server").is_file():
        pytest.fail("redis-server is not installed (scripts/bootstrap.sh test installs it)")
    redis_port = free_port()
    redis = _redis(redis_port)
    try:
        url = f"redis://127.0.0.1:{redis_port}"
        publisher_side = make_server("--redis", url)
        viewer_side = make_server("--redis", url)
        browser = launch_browser()
        viewer, problems = open_viewer(browser, viewer_side, f"?channel={CHANNEL}", {"width": 1280, "height": 800})
        viewer.wait_for_selector("#viewer-status[data-state=waiting]")
        published = publish(browser, publisher_side)
        count = len([f for f in published["finals"] if f["text"].strip()])
        viewer.wait_for_function(f"document.querySelectorAll('.final').length >= {count}")
        check_finals(shown_finals(viewer, 1), published["finals"])
        viewer.wait_for_selector("#viewer-status[data-state=ended]")

        redis.terminate()
        redis.wait(timeout=30)
        viewer.wait_for_function("window.__probe.received.some(m => m.type === 'relay' && m.state === 'down')")
        viewer.wait_for_selector("#viewer-status[data-state=reconnecting]")
        assert "Captions delayed" in viewer.text_content("#viewer-status")

        redis = _redis(redis_port)
        viewer.wait_for_function("window.__probe.received.some(m => m.type === 'relay' && m.state === 'up')")
        viewer.wait_for_selector("#viewer-status[data-state=ended]")
        check_finals(shown_finals(viewer, 1), published["finals"])
        assert not problems, "\n".join(problems)
    finally:
        redis.kill()
        redis.wait(timeout=30)
