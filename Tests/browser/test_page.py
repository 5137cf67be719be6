"""The captioning page in headless chromium, with the fake microphone playing a WAV file,
against the real steno server: the Opus (WebCodecs) path on a desktop-sized window and the
forced PCM path at 360 px, operated from the keyboard."""

from __future__ import annotations

import re
import wave

import pytest

from conftest import SPEECH_WAV, check_paragraphs
from wordmatch import assert_similar, compare

# Generous limits that only guard against hangs.
WAIT_MS = 120_000

with wave.open(str(SPEECH_WAV)) as _w:
    WAV_SECONDS = _w.getnframes() / _w.getframerate()

# Instrumentation added before the page's own scripts: records what crosses the WebSocket
# and watches the DOM for more than one volatile line or a volatile line that grows children.
PROBE = r"""
(() => {
  const probe = window.__probe = {
    urls: [], received: [], sentText: [], frames: [], closes: [],
    maxVolatileElements: 0, maxVolatileNodes: 0, volatileShown: [], volatileAtFinalized: [],
    maxLevel: 0, lagShown: [],
  };
  const Native = window.WebSocket;
  class ProbedWebSocket extends Native {
    constructor(...args) {
      super(...args);
      probe.urls.push(String(args[0]));
      this.addEventListener('message', (event) => {
        if (typeof event.data !== 'string') return;
        const message = JSON.parse(event.data);
        probe.received.push(message);
      });
      this.addEventListener('close', (event) => probe.closes.push(event.code));
    }
    send(data) {
      if (typeof data === 'string') {
        probe.sentText.push(JSON.parse(data));
      } else {
        const bytes = data instanceof ArrayBuffer ? new Uint8Array(data)
          : new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
        probe.frames.push([bytes.length, bytes[0], bytes.length > 1 ? bytes[1] : 0]);
      }
      return super.send(data);
    }
  }
  window.WebSocket = ProbedWebSocket;
  const check = (records) => {
    // The page marks #status with data-finalized while it handles `finalized`; this callback
    // runs right after that handler, before the next message, so it sees the line as left.
    for (const record of records) {
      if (record.attributeName === 'data-finalized' && record.target.dataset.finalized) {
        probe.volatileAtFinalized.push(document.getElementById('volatile').textContent);
      }
    }
    probe.maxVolatileElements = Math.max(probe.maxVolatileElements,
      document.querySelectorAll('#volatile, .volatile').length);
    const level = document.getElementById('level');
    if (level) probe.maxLevel = Math.max(probe.maxLevel, Number(level.getAttribute('aria-valuenow')) || 0);
    const lag = document.getElementById('lag');
    if (lag && lag.textContent !== probe.lagShown[probe.lagShown.length - 1]) probe.lagShown.push(lag.textContent);
    const line = document.getElementById('volatile');
    if (!line) return;
    probe.maxVolatileNodes = Math.max(probe.maxVolatileNodes, line.childNodes.length);
    const text = line.textContent;
    if (text && text !== probe.volatileShown[probe.volatileShown.length - 1]) probe.volatileShown.push(text);
  };
  new MutationObserver(check).observe(document, {
    subtree: true, childList: true, characterData: true, attributes: true, attributeFilter: ['aria-valuenow', 'data-finalized'],
  });
})();
"""

PAGE_CHANNEL = "page-test"

TIME_RANGE = re.compile(r"^\d+:\d\d\.\d\d – \d+:\d\d\.\d\d$")


def opus_packet_samples(first: int, second: int) -> int:
    """Samples at 48 kHz in an Opus packet, from its TOC byte (RFC 6716 §3.1)."""
    config = first >> 3
    if config < 12:
        frame = (480, 960, 1920, 2880)[config & 3]
    elif config < 16:
        frame = 960 if config & 1 else 480
    else:
        frame = (120, 240, 480, 960)[config & 3]
    code = first & 3
    count = 1 if code == 0 else 2 if code in (1, 2) else second & 0x3F
    return count * frame


def open_page(browser, server, query: str, viewport: dict, extra_script: str | None = None):
    context = browser.new_context(viewport=viewport, accept_downloads=True)
    page = context.new_page()
    page.add_init_script(PROBE)
    if extra_script:
        page.add_init_script(extra_script)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(f"page error: {error}"))
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
    page.goto(f"{server.http}/{query}")
    return page, problems


def declared_silence(probe) -> list[float]:
    """The pauses the page left out and declared (`silence`), in seconds."""
    return [m["duration"] for m in probe["sentText"] if m["type"] == "silence"]


def caption_session(page, artifacts, name: str) -> dict:
    """Runs the file through the page (Start already pressed), then Finalize and End.
    Returns what the page showed and what crossed the socket."""
    page.wait_for_selector("#status[data-state=listening]", timeout=WAIT_MS)
    # The fake microphone plays the file once in real time; wait until the page has captured all of it.
    page.wait_for_function(
        f"Number(document.getElementById('audio-time').dataset.seconds) >= {WAV_SECONDS + 0.5}", timeout=WAIT_MS)

    buffered = page.text_content("#buffered")
    page.click("#finalize")
    page.wait_for_selector("#status[data-finalized]", timeout=WAIT_MS)
    assert "finalized" in page.text_content("#status").lower()
    finals_dom = page.eval_on_selector_all("#finals .final", "els => els.map(e => ({text: e.textContent, title: e.title}))")
    paragraphs = check_paragraphs(page, "#finals")
    page.screenshot(path=str(artifacts / f"{name}.png"), full_page=True)

    page.click("#end")
    page.wait_for_selector("#status[data-state=ended]", timeout=WAIT_MS)
    status = page.text_content("#status")
    page.wait_for_function("window.__probe.closes.length > 0", timeout=WAIT_MS)
    probe = page.evaluate("window.__probe")
    finals_at_end = page.eval_on_selector_all("#finals .final", "els => els.map(e => e.textContent.trim())")
    return {"finals": finals_dom, "paragraphs": paragraphs, "finals_at_end": finals_at_end, "status": status, "probe": probe,
            "buffered": buffered, "name": name, "artifacts": artifacts,
            "format": page.get_attribute("#format", "data-encoding"),
            "rate": int(page.get_attribute("#format", "data-sample-rate")),
            "error": page.text_content("#error")}


def check_session(result: dict, reference: list[str], problems: list[str]):
    probe = result["probe"]
    received = probe["received"]
    types = [m["type"] for m in received]
    assert not problems, "\n".join(problems)
    assert result["error"].strip() == "", f"the page showed an error: {result['error']}"

    # The protocol as the page used it.
    start = probe["sentText"][0]
    assert start["type"] == "start"
    assert start["audio"]["sampleRate"] == result["rate"]
    assert types[0] == "ready"
    assert "finalize" in [m["type"] for m in probe["sentText"]]
    assert "finalized" in types and "ended" in types
    assert probe["closes"] == [1000]
    assert "Ended" in result["status"]
    seqs = [m["seq"] for m in received]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "seq must increase"

    # Finals: one element per non-empty final event, same text, in order, with a time range title.
    final_texts = [m["text"].strip() for m in received if m["type"] == "final" and m["text"].strip()]
    ended_at = types.index("ended")
    shown_before_end = [f["text"].strip() for f in result["finals"]]
    assert shown_before_end == final_texts[: len(shown_before_end)], "finals shown differ from final events"
    assert len(shown_before_end) >= 1, "no finals were shown"
    for final in result["finals"]:
        assert TIME_RANGE.match(final["title"]), f"final without a time range title: {final}"
    assert all(m["type"] != "final" for m in received[ended_at + 1:]), "final after ended"

    # The volatile line: at most one element, never more than one text node, replaced in place.
    assert probe["maxVolatileElements"] == 1, f"{probe['maxVolatileElements']} volatile elements at once"
    assert probe["maxVolatileNodes"] <= 1, "the volatile line grew children instead of being replaced"
    volatile_texts = [m["text"] for m in received if m["type"] == "volatile" and m["text"]]
    assert volatile_texts, "the server sent no volatile result with text"
    assert probe["volatileShown"], "no volatile text was shown"
    assert set(probe["volatileShown"]) <= set(volatile_texts), "the volatile line showed text the server did not send"
    assert probe["volatileAtFinalized"] and probe["volatileAtFinalized"][0] == "", \
        "the volatile line was not cleared when finalized"

    # The meters moved: the level meter saw the speech, the lag showed the server's progress.
    assert probe["maxLevel"] > 20, "the level meter never showed the speech"
    assert "progress" in types
    assert any(re.fullmatch(r"\d+\.\d s", lag) for lag in probe["lagShown"]), f"lag never shown: {probe['lagShown']}"
    assert re.fullmatch(r"\d+(\.\d)? (B|KB|MB)", result["buffered"])

    # Words: the finals shown say what the server transcribes for the same file. The
    # threshold is explained in wordmatch.py; a broken audio path scores far below it.
    match = compare(reference, shown_before_end)
    (result["artifacts"] / f"{result['name']}-words.txt").write_text(match.describe() + "\n")
    return assert_similar(reference, shown_before_end, min_f1=0.6)


def test_opus_captions_desktop(server, reference, launch_browser, artifacts):
    browser = launch_browser(SPEECH_WAV)
    page, problems = open_page(browser, server, "", {"width": 1280, "height": 860})
    page.click("#start")
    result = caption_session(page, artifacts, "page-opus-desktop")
    check_session(result, reference, problems)

    assert result["format"] == "opus", "chromium has WebCodecs Opus; the automatic choice must be Opus"
    assert "Opus" in page.text_content("#format")
    assert result["rate"] in (8000, 12000, 16000, 24000, 48000)
    # One Opus packet per binary frame, each 20 ms; with the pauses declared as `silence`
    # (whole packets of them), covering what the server says it received.
    frames = result["probe"]["frames"]
    samples = [opus_packet_samples(first, second) for _, first, second in frames]
    assert frames and all(s == 960 for s in samples), f"unexpected packet durations: {sorted(set(samples))}"
    silences = declared_silence(result["probe"])
    assert silences and all(float(round(d * 50, 6)).is_integer() for d in silences), silences
    ended = next(m for m in result["probe"]["received"] if m["type"] == "ended")
    assert abs(ended["duration"] - sum(samples) / 48000 - sum(silences)) < 0.05

    # A second session on the same page (the file has played; the microphone is silent now), cancelled.
    page.click("#start")
    page.wait_for_selector("#status[data-state=listening]", timeout=WAIT_MS)
    page.wait_for_function("window.__probe.received.filter(m => m.type === 'ready').length === 2", timeout=WAIT_MS)
    page.click("#cancel")
    page.wait_for_selector("#status[data-state=cancelled]", timeout=WAIT_MS)
    assert "Cancelled" in page.text_content("#status")
    page.wait_for_function("window.__probe.closes.length === 2", timeout=WAIT_MS)
    probe = page.evaluate("window.__probe")
    assert probe["closes"] == [1000, 1000]
    assert [m["type"] for m in probe["received"]][-1] == "cancelled"
    assert probe["sentText"][-1] == {"type": "cancel"}
    assert page.text_content("#volatile") == ""
    assert page.is_enabled("#start") and page.is_disabled("#cancel")
    assert not problems, "\n".join(problems)


def test_pcm_captions_360px_keyboard(server, reference, launch_browser, artifacts):
    browser = launch_browser(SPEECH_WAV)
    # A token in the page address is passed on to the WebSocket; a server started without
    # tokens ignores it.
    page, problems = open_page(browser, server, f"?encoding=pcm&token=page-token&channel={PAGE_CHANNEL}&model=en-us",
                               {"width": 360, "height": 780})
    # Settings list the server's models (/v1/models), the one the address names chosen. Until
    # the list comes the address's model is an option of its own, plainly named: wait for the list.
    page.wait_for_function("[...document.querySelectorAll('#model option')].some(o => o.textContent.includes('('))",
                           timeout=WAIT_MS)
    assert page.evaluate("[...document.querySelectorAll('#model option')].map(o => o.textContent)") == [
        "The server's default", "en-us (pocketsphinx, en-US) — default"]
    assert page.input_value("#model") == "en-us"

    # Nothing wider than the screen, every control on it.
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    for selector in ("#start", "#stop", "#finalize", "#end", "#cancel", "#download-txt", "#download-vtt",
                     "#download-srt", "#transcript", "#level", "#format", "#lag", "#buffered", "#status"):
        box = page.locator(selector).bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 360, f"{selector} is off screen: {box}"
    assert page.get_attribute("#finals", "aria-live") == "polite"

    # Start from the keyboard: Tab to the button, press Enter.
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement && document.activeElement.id") == "start":
            break
    else:
        pytest.fail("the Start button cannot be reached with Tab")
    page.keyboard.press("Enter")

    result = caption_session(page, artifacts, "page-pcm-360")
    check_session(result, reference, problems)
    assert result["probe"]["urls"] == [f"{server.ws}?token=page-token"]
    assert result["probe"]["sentText"][0]["model"] == "en-us"
    ready = next(m for m in result["probe"]["received"] if m["type"] == "ready")
    assert ready["engine"]["model"] == "en-us"

    assert result["format"] == "pcm_s16le"
    assert "PCM" in page.text_content("#format")
    assert 8000 <= result["rate"] <= 48000
    frames = result["probe"]["frames"]
    assert frames and all(length % 2 == 0 for length, _, _ in frames), "PCM frames must hold whole samples"
    silences = declared_silence(result["probe"])
    assert silences, "the quiet after the file is left out and declared"
    ended = next(m for m in result["probe"]["received"] if m["type"] == "ended")
    assert abs(ended["duration"] - sum(length for length, _, _ in frames) / 2 / result["rate"] - sum(silences)) < 0.05
    assert page.evaluate("document.documentElement.scrollWidth") <= 360

    # Downloads, generated in the page from the finals: the very files the server makes of the
    # same finals (the session published them to a channel), byte for byte.
    finals = result["finals_at_end"]
    for kind in ("txt", "vtt", "srt"):
        with page.expect_download(timeout=WAIT_MS) as info:
            page.click(f"#download-{kind}")
        download = info.value
        assert download.suggested_filename.endswith(f".{kind}")
        path = artifacts / f"transcript.{kind}"
        download.save_as(str(path))
        mine = path.read_text(encoding="utf-8")
        response = page.request.get(f"{server.http}/v1/channels/{PAGE_CHANNEL}/captions.{kind}")
        assert response.status == 200
        (artifacts / f"transcript-server.{kind}").write_text(response.text(), encoding="utf-8")
        assert mine == response.text(), f"the page's {kind} differs from the server's for the same finals"
        assert mine.strip(), f"empty {kind}"
    texts = {kind: (artifacts / f"transcript.{kind}").read_text(encoding="utf-8") for kind in ("txt", "vtt", "srt")}
    assert texts["vtt"].startswith("WEBVTT\n\n")
    assert re.match(r"1\n\d\d:\d\d:\d\d,\d\d\d --> \d\d:\d\d:\d\d,\d\d\d\n", texts["srt"])
    cue_words = [w for line in texts["srt"].splitlines() if line and "-->" not in line and not line.isdigit()
                 for w in line.split()]
    assert cue_words == " ".join(finals).split()


# A server that cannot take Opus answers `start` with unsupported_audio and closes with 1003.
# This one can, so the page's first Opus `start` gets that answer here instead; every other
# message goes to the real server.
REFUSE_OPUS = r"""
(() => {
  const Parent = window.WebSocket;
  window.__opusRefused = 0;
  window.WebSocket = class extends Parent {
    send(data) {
      if (typeof data === 'string' && window.__opusRefused === 0) {
        const message = JSON.parse(data);
        if (message.type === 'start' && message.audio.encoding === 'opus') {
          window.__opusRefused += 1;
          window.__refusedStart = message;
          const onclose = this.onclose;
          this.onclose = null;
          this.onmessage?.({ data: JSON.stringify({ type: 'error', seq: 1, code: 'unsupported_audio',
            message: 'opus is not accepted here', fatal: true }) });
          super.close();
          setTimeout(() => onclose?.({ code: 1003, reason: 'unsupported_audio', wasClean: true }), 0);
          return undefined;
        }
      }
      return super.send(data);
    }
  };
})();
"""


def test_opus_refused_goes_on_in_pcm(server, launch_browser):
    browser = launch_browser(SPEECH_WAV)
    page, problems = open_page(browser, server, "", {"width": 1024, "height": 800}, extra_script=REFUSE_OPUS)
    page.click("#start")
    page.wait_for_function("window.__opusRefused === 1", timeout=WAIT_MS)
    page.wait_for_selector("#status[data-state=listening]", timeout=WAIT_MS)
    assert "does not accept Opus" in page.text_content("#error")
    assert page.get_attribute("#format", "data-encoding") == "pcm_s16le"
    assert "the server does not accept Opus" in page.text_content("#format")
    page.wait_for_function("Number(document.getElementById('audio-time').dataset.seconds) >= 3", timeout=WAIT_MS)
    page.click("#end")
    page.wait_for_selector("#status[data-state=ended]", timeout=WAIT_MS)
    probe = page.evaluate("window.__probe")
    refused = page.evaluate("window.__refusedStart")
    starts = [m for m in probe["sentText"] if m["type"] == "start"]  # what reached the server
    assert [s["audio"]["encoding"] for s in starts] == ["pcm_s16le"]
    assert starts[0]["audio"]["sampleRate"] == refused["audio"]["sampleRate"], "PCM at the Opus rate, same microphone"
    assert probe["frames"] and all(length % 2 == 0 for length, _, _ in probe["frames"])
    ended = next(m for m in probe["received"] if m["type"] == "ended")
    rate = starts[0]["audio"]["sampleRate"]
    assert abs(ended["duration"] - sum(length for length, _, _ in probe["frames"]) / 2 / rate
               - sum(declared_silence(probe))) < 0.05
    assert ended["duration"] > 2.5, "the microphone went on in PCM"
    assert page.is_enabled("#start")
    assert not problems, "\n".join(problems)
