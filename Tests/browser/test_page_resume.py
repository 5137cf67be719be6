"""The captioning page across a dropped connection, against the real server: a TCP proxy
between the page and the server (cut_proxy.py) loses what is in flight both ways, then
resets the connection, mid-utterance, while the fake microphone plays the file. The page
must resume the same session: every event exactly once across both connections, the audio
the server did not get sent again byte for byte, and the finals those of an uninterrupted
run of the same audio (`steno transcribe`)."""

from __future__ import annotations

import base64
import concurrent.futures
import json
import os
import shlex
import subprocess
import time
import wave

from conftest import SPEECH_WAV, TRANSCRIBE_TIMEOUT
from cut_proxy import CutProxy
from test_page import open_page, opus_packet_samples
from test_page_server import own_problems
from wordmatch import assert_similar

WAIT_MS = 120_000  # guards against hangs only

with wave.open(str(SPEECH_WAV)) as _w:
    WAV_SECONDS = _w.getnframes() / _w.getframerate()
# The file ends with 1.5 s of silence (data/README.md): End may come once half a second of it
# has been captured; `end` finalizes everything received.
SPEECH_OVER = WAV_SECONDS - 1.0

# Records what each WebSocket of the page carried, in order: messages in and out, and every
# audio frame whole (the page's own probe keeps only their first bytes).
RECORD = r"""
(() => {
  const wire = window.__wire = [];
  const Parent = window.WebSocket;
  window.WebSocket = class extends Parent {
    constructor(...args) {
      super(...args);
      const record = { url: String(args[0]), log: [], audio: [], close: null };
      wire.push(record);
      this.__record = record;
      this.addEventListener('message', (event) => {
        if (typeof event.data === 'string') record.log.push(['in', JSON.parse(event.data)]);
      });
      this.addEventListener('close', (event) => { record.close = event.code; });
    }
    send(data) {
      const record = this.__record;
      if (typeof data === 'string') {
        record.log.push(['out', JSON.parse(data)]);
      } else {
        const bytes = data instanceof ArrayBuffer ? new Uint8Array(data.slice(0))
          : new Uint8Array(data.buffer.slice(data.byteOffset, data.byteOffset + data.byteLength));
        record.audio.push(bytes);
        record.log.push(['audio', bytes.length]);
      }
      return super.send(data);
    }
  };
  window.__audioSent = (i) => wire[i] ? wire[i].audio.length : 0;
  // Silence the page declared instead of sending audio (a pause left out).
  window.__silenceSent = (i) => wire[i] ? wire[i].log.filter(([kind, m]) => kind === 'out' && m.type === 'silence').length : 0;
  window.__wireSummary = () => wire.map((r) => ({
    url: r.url, close: r.close, log: r.log,
    frames: r.audio.map((bytes) => {
      let s = '';
      for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      return btoa(s);
    }),
  }));
})();
"""


def wait_until(condition, what: str, timeout: float = WAIT_MS / 1000):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting: {what}"
        time.sleep(0.02)


def transcribe_jsonl(steno_bin, wav_path) -> list[dict]:
    args = [str(steno_bin), "transcribe", str(wav_path), "--engine", "pocketsphinx", "--format", "jsonl", "--no-progress"]
    args += shlex.split(os.environ.get("STENO_TRANSCRIBE_ARGS", ""))
    result = subprocess.run(args, capture_output=True, text=True, timeout=TRANSCRIBE_TIMEOUT)
    assert result.returncode == 0, f"steno transcribe failed:\n{result.stderr[-4000:]}"
    events = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    return [e for e in events if e["type"] == "final" and e["text"].strip()]


def check_connections(page, problems) -> dict:
    """What crossed the two connections of a page that resumed once; the protocol checks that
    do not depend on the format."""
    wire = page.evaluate("window.__wireSummary()")
    assert [c["close"] for c in wire] == [1006, 1000], \
        f"one connection cut, one resumed and ended: {[(c['url'], c['close']) for c in wire]}"
    first, second = wire
    inbound = [[m for kind, m in c["log"] if kind == "in"] for c in wire]
    outbound = [[m for kind, m in c["log"] if kind == "out"] for c in wire]
    ready = inbound[0][0]
    assert ready["type"] == "ready" and ready["resumeToken"], ready
    assert outbound[0][0]["type"] == "start"

    # The second connection resumes the session after the last event the page got.
    assert outbound[1][0] == {"type": "resume", "session": ready["session"], "resumeToken": ready["resumeToken"],
                              "after": inbound[0][-1]["seq"]}
    assert not [m for m in outbound[1] if m["type"] in ("start", "gap")], outbound[1]
    resumed_at = next(i for i, (kind, m) in enumerate(second["log"]) if kind == "in" and m["type"] == "resumed")
    assert all(kind == "in" for kind, _ in second["log"][1:resumed_at]), "the page sent something before resumed"
    resumed = second["log"][resumed_at][1]
    assert resumed["session"] == ready["session"]
    replayed = [m for kind, m in second["log"][:resumed_at] if kind == "in"]
    assert replayed, "the events lost in transit were not sent again"

    # Every event exactly once: one numbering across both connections, no gap, no repeat.
    events = inbound[0] + inbound[1]
    seqs = [m["seq"] for m in events]
    assert seqs == list(range(1, len(seqs) + 1)), seqs
    assert [m["type"] for m in events].count("ready") == 1
    ended = events[-1]
    assert ended["type"] == "ended", ended

    # Each final shown once, in order, as the server sent it.
    finals = [m for m in events if m["type"] == "final" and m["text"].strip()]
    shown = page.eval_on_selector_all(
        "#finals .final", "els => els.map(e => ({text: e.textContent.trim(), start: Number(e.dataset.start), end: Number(e.dataset.end)}))")
    assert [f["text"] for f in shown] == [f["text"].strip() for f in finals], "the page shows a final twice, or misses one"
    for mine, theirs in zip(shown, finals):
        assert abs(mine["start"] - theirs["start"]) < 0.0006 and abs(mine["end"] - theirs["end"]) < 0.0006
    assert not own_problems(problems), "\n".join(problems)
    return {"wire": wire, "ready": ready, "resumed": resumed, "ended": ended, "finals": finals, "shown": shown,
            "replayed": len(replayed), "start": outbound[0][0]}


def split_at(frames: list[bytes], durations: list[float], seconds: float) -> int:
    """The index of the frame boundary at `seconds` (the server counts whole messages)."""
    ends, t = [0.0], 0.0
    for d in durations:
        t += d
        ends.append(t)
    k = min(range(len(ends)), key=lambda i: abs(ends[i] - seconds))
    assert abs(ends[k] - seconds) < 0.001, f"the server's count {seconds} is not between two frames sent ({ends[k]})"
    return k


def sent_items(connection: dict) -> list:
    """What a connection carried on the session's timeline, in order: audio frames (bytes) and
    the pauses the page left out and declared (`silence`, as their duration in seconds)."""
    frames = iter(base64.b64decode(f) for f in connection["frames"])
    items = []
    for kind, message in connection["log"]:
        if kind == "audio":
            items.append(next(frames))
        elif kind == "out" and message["type"] == "silence":
            items.append(float(message["duration"]))
    return items


def check_audio(result: dict, duration_of) -> bytes:
    """The audio the server got: the first connection's up to `resumed.received`, then all of
    the second's, which must begin with what the first sent after that point, byte for byte
    (and declared silence for declared silence)."""
    def duration(item):
        return item if isinstance(item, float) else duration_of(item)

    first, second = (sent_items(c) for c in result["wire"])
    k = split_at(first, [duration(f) for f in first], result["resumed"]["received"])
    in_flight = first[k:]
    assert in_flight, "no audio was in flight when the connection went: nothing was sent again"
    assert second[: len(in_flight)] == in_flight, "what was sent again is not what was lost"
    heard = first[:k] + second
    assert abs(sum(duration(f) for f in heard) - result["ended"]["duration"]) < 0.002, \
        "the server's duration is not the audio sent"
    result["in_flight_seconds"] = sum(duration(f) for f in in_flight)
    result["silence_seconds"] = sum(f for f in heard if isinstance(f, float))
    return b"".join(f for f in heard if not isinstance(f, float))


def test_page_resumes_after_a_dropped_connection(make_server, steno_bin, reference, launch_browser, artifacts):
    """Two pages side by side, each through its own proxy to its own server, so that the file
    plays in real time once for both: PCM, whose audio the test gives to `steno transcribe`
    (every sample sent: `suppression=off`), and Opus, the automatic choice, with pauses left
    out and declared."""
    servers = [make_server(), make_server()]
    proxies = [CutProxy(s.port) for s in servers]
    try:
        browser = launch_browser(SPEECH_WAV)
        pages = [open_page(browser, proxy, query, {"width": 1024, "height": 800}, extra_script=RECORD)
                 for proxy, query in zip(proxies, ("?encoding=pcm&suppression=off", ""))]
        for page, _ in pages:
            page.click("#start")

        # Mid-utterance (the first words show as a guess), the events from the server go
        # missing, then the audio from the page, and then the connection goes.
        for page, _ in pages:
            page.wait_for_function("window.__probe.volatileShown.length >= 1", timeout=WAIT_MS)
        for proxy in proxies:
            proxy.stall("down")
        wait_until(lambda: all(p.lost("down") > 0 for p in proxies), "events lost in transit")
        sent = [page.evaluate("[window.__audioSent(0), window.__silenceSent(0)]") for page, _ in pages]
        for proxy in proxies:
            proxy.stall("up")
        for (page, _), (n, silences) in zip(pages, sent):
            # 0.2 s of audio more, or (the Opus page, in a pause it leaves out) a silence declared.
            page.wait_for_function(f"window.__audioSent(0) >= {n + 10} || window.__silenceSent(0) > {silences}",
                                   timeout=WAIT_MS)
        wait_until(lambda: all(p.lost("up") > 0 for p in proxies), "audio lost in transit")
        for proxy in proxies:
            proxy.cut()

        for page, _ in pages:
            page.wait_for_selector("#error[data-about=reconnected]", timeout=WAIT_MS)
            assert page.text_content("#error").strip() == "Reconnected; nothing was lost."
            assert page.get_attribute("#error", "data-lost-seconds") == "0.000"
            assert page.get_attribute("#error", "data-kind") == "info"
        pages[0][0].screenshot(path=str(artifacts / "page-resumed.png"), full_page=True)
        for page, _ in pages:
            page.wait_for_function(
                f"Number(document.getElementById('audio-time').dataset.seconds) >= {SPEECH_OVER}", timeout=WAIT_MS)
            page.click("#end")
        ended = []
        for page, problems in pages:
            page.wait_for_selector("#status[data-state=ended]", timeout=WAIT_MS)
            page.wait_for_function("window.__wire.length === 2 && window.__wire[1].close !== null", timeout=WAIT_MS)
            ended.append(check_connections(page, problems))
            if len(ended) == 1:
                # PCM: the audio the server got is the page's whole capture. Its uninterrupted
                # run goes on in the background while the Opus page is checked.
                pcm = ended[0]
                rate = pcm["start"]["audio"]["sampleRate"]
                heard = check_audio(pcm, lambda frame: len(frame) / 2 / rate)
                assert pcm["silence_seconds"] == 0, "suppression=off: every sample goes as audio"
                captured = float(page.get_attribute("#audio-time", "data-seconds"))
                assert abs(captured - pcm["ended"]["duration"]) < 0.002, \
                    f"audio the microphone captured is missing or doubled: {captured} s captured, {pcm['ended']['duration']} s captioned"
                path = artifacts / "page-resumed-pcm.wav"
                with wave.open(str(path), "wb") as out:
                    out.setnchannels(1)
                    out.setsampwidth(2)
                    out.setframerate(rate)
                    out.writeframes(heard)
                background = concurrent.futures.ThreadPoolExecutor(1)
                uninterrupted_run = background.submit(transcribe_jsonl, steno_bin, path)
    finally:
        for proxy in proxies:
            proxy.close()

    pcm, opus = ended
    assert pcm["start"]["audio"]["encoding"] == "pcm_s16le" and opus["start"]["audio"]["encoding"] == "opus"

    # Opus, with pauses left out (the default): the same accounting, by packet durations and
    # the silence declared (if a pause of the file was long enough to be left out).
    check_audio(opus, lambda packet: opus_packet_samples(packet[0], packet[1] if len(packet) > 1 else 0) / 48000)

    # PCM: the finals across the drop are those of the same audio run through the server's
    # pipeline without a break.
    uninterrupted = uninterrupted_run.result()
    background.shutdown()
    assert [(f["text"], round(f["start"], 3), round(f["end"], 3)) for f in pcm["finals"]] == \
        [(f["text"], round(f["start"], 3), round(f["end"], 3)) for f in uninterrupted], \
        "the finals across the drop differ from an uninterrupted run of the same audio"

    report = []
    for name, result in (("pcm", pcm), ("opus", opus)):
        received = result["resumed"]["received"]
        within = [f["text"] for f in result["finals"] if f["start"] < received < f["end"]]
        report.append(f"{name}: cut at {received:.3f} s of audio ({'mid-utterance: ' + within[0] if within else 'between utterances'}); "
                      f"{result['in_flight_seconds']:.3f} s sent again, {result['replayed']} events sent again or held, "
                      f"{result['silence_seconds']:.3f} s declared as silence")
        assert_similar(reference, [f["text"] for f in result["shown"]], min_f1=0.6)
    (artifacts / "page-resumed.txt").write_text("\n".join(report) + "\n")
