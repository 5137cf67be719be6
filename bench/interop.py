#!/usr/bin/env python3
"""Interop benchmark: the same speech through each API one server speaks, side by side in one
run: Steno's own protocol, Deepgram's live API (deepgram-sdk), OpenAI Realtime transcription
(openai SDK), all at real time; and OpenAI's REST upload, against the same model's batch
transcription of the same files (the floor). Prints WER, finals' latency and CPU per audio
second.

    .venv/bin/python bench/interop.py [--steno .build/release/steno] [--rounds 1]

Live: the LibriVox reading (its four sentences, 1.5 s of silence before each and after the
last: 21 s), sent in 100 ms chunks at real time. A final's latency is its arrival minus the
moment its audio end was sent: the result's end for Steno and Deepgram (both time their
results on the audio timeline), the `speech_stopped` before it for Realtime (its transcripts
carry no times). REST: each LibriVox sentence and Beckett's recording posted as a WAV file,
one after the other; CPU is the server's and its worker's, per second of audio."""

import argparse
import base64
import json
import os
import sys
import threading
import time
import wave

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
import steno_serve  # noqa: E402
from streaming import children, cpu_seconds, percentile, reading  # noqa: E402
from worker_client import default_model, errors, floor, librivox, normalized, read_wav  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TOKEN = "bench"
CHUNK = 0.1


def pcm_of(path):
    with wave.open(path) as w:
        return w.readframes(w.getnframes()), w.getframerate()


def server_cpu(process):
    return cpu_seconds(process.pid) + sum(cpu_seconds(c) for c in children(process.pid))


def paced(pcm, rate, send, clock, width=2):
    """Sends `pcm` in CHUNK pieces at real time; `clock[0]` says when audio time t was sent
    (from the first chunk on)."""
    step = int(rate * CHUNK) * width
    started = time.monotonic()
    clock[0] = lambda t: started + t
    for i, offset in enumerate(range(0, len(pcm), step)):
        delay = started + i * CHUNK - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        send(pcm[offset:offset + step])


def steno_live(port, path):
    import websockets.sync.client as ws
    pcm, rate = pcm_of(path)
    finals, latencies = [], []
    with ws.connect(f"ws://127.0.0.1:{port}/v1/stream", additional_headers={"Authorization": f"Bearer {TOKEN}"}) as c:
        c.send(json.dumps({"type": "start", "audio": {"encoding": "pcm_s16le", "sampleRate": rate, "channels": 1}}))
        assert json.loads(c.recv())["type"] == "ready"
        sent_at = [None]
        done = threading.Event()

        def read():
            for message in c:
                e = json.loads(message)
                if e["type"] == "final":
                    finals.append(e["text"])
                    if sent_at[0]:
                        latencies.append(time.monotonic() - sent_at[0](e["end"]))
                if e["type"] == "ended":
                    break
            done.set()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        paced(pcm, rate, c.send, sent_at)
        c.send(json.dumps({"type": "end"}))
        done.wait(60)
    return " ".join(finals), latencies


def deepgram_live(port, path):
    from deepgram import DeepgramClient
    from deepgram.core.events import EventType
    from deepgram.environment import DeepgramClientEnvironment
    from deepgram.listen.v1.types import ListenV1Metadata, ListenV1Results
    pcm, rate = pcm_of(path)
    env = DeepgramClientEnvironment(base=f"http://127.0.0.1:{port}", production=f"ws://127.0.0.1:{port}", agent="", agent_rest="")
    finals, latencies, closed, sent_at = [], [], threading.Event(), [None]
    with DeepgramClient(api_key=TOKEN, environment=env).listen.v1.connect(
            model="nova-3", encoding="linear16", sample_rate=rate, interim_results="true", punctuate="true") as conn:
        def on_message(m):
            if isinstance(m, ListenV1Results) and m.is_final and m.channel.alternatives[0].transcript:
                finals.append(m.channel.alternatives[0].transcript)
                if sent_at[0]:
                    latencies.append(time.monotonic() - sent_at[0](m.start + m.duration))
            if isinstance(m, ListenV1Metadata):
                closed.set()
        conn.on(EventType.MESSAGE, on_message)
        threading.Thread(target=conn.start_listening, daemon=True).start()
        paced(pcm, rate, conn.send_media, sent_at)
        conn.send_close_stream()
        closed.wait(60)
    return " ".join(finals), latencies


def realtime_live(port, path):
    import numpy as np
    from openai import OpenAI
    pcm, rate = pcm_of(path)
    x = np.frombuffer(pcm, dtype="<i2").astype(np.float64)
    n = int(len(x) * 24000 / rate)
    pcm24 = np.interp(np.arange(n) * rate / 24000, np.arange(len(x)), x).astype("<i2").tobytes()
    client = OpenAI(api_key=TOKEN, base_url=f"http://127.0.0.1:{port}/v1")
    finals, latencies, sent_at, stopped = [], [], [None], [None]
    with client.realtime.connect(extra_query={"intent": "transcription"}) as conn:
        def read():
            try:
                while True:
                    e = json.loads(conn.recv_bytes())
                    if e["type"] == "input_audio_buffer.speech_stopped":
                        stopped[0] = e["audio_end_ms"] / 1000
                    if e["type"] == "conversation.item.input_audio_transcription.completed" and e["transcript"]:
                        finals.append(e["transcript"])
                        if sent_at[0] and stopped[0] is not None:
                            latencies.append(time.monotonic() - sent_at[0](stopped[0]))
                            stopped[0] = None
            except Exception:
                pass
        threading.Thread(target=read, daemon=True).start()
        paced(pcm24, 24000, lambda b: conn.input_audio_buffer.append(audio=base64.b64encode(b).decode()), sent_at)
        conn.input_audio_buffer.commit()
        time.sleep(3)
    return " ".join(finals), latencies


def rest(port, paths):
    from openai import OpenAI
    client = OpenAI(api_key=TOKEN, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    texts = []
    for path in paths:
        with open(path, "rb") as f:
            texts.append(client.audio.transcriptions.create(model="whisper-1", file=f).text)
    return texts


def uploading(port, files, stop, count):
    """Posts `files` one after the other, again and again, until `stop` is set; counts them."""
    from openai import OpenAI
    client = OpenAI(api_key=TOKEN, base_url=f"http://127.0.0.1:{port}/v1", max_retries=0)
    while not stop.is_set():
        for path in files:
            if stop.is_set():
                break
            try:
                with open(path, "rb") as f:
                    client.audio.transcriptions.create(model="whisper-1", file=f)
                count[0] += 1
            except Exception:
                count[1] += 1
                time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steno", default=os.path.join(ROOT, ".build", "release", "steno"))
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()

    path, reference = reading(range(4))
    audio_seconds = wave.open(path).getnframes() / 16000
    process, port = steno_serve.serve(args.steno, ["--token", TOKEN, "--whisper-multilingual", "none", "--idle-timeout", "0"])
    rows = []
    try:
        for name, run in [("Steno's protocol", steno_live), ("Deepgram live", deepgram_live), ("OpenAI Realtime", realtime_live)]:
            wer_errors = words = 0
            lat, cpu = [], 0.0
            for _ in range(args.rounds):
                before = server_cpu(process)
                text, latencies = run(port, path)
                cpu += server_cpu(process) - before
                wer_errors += errors(reference, normalized(text))
                words += len(reference)
                lat += latencies
            rows.append((name, 100 * wer_errors / words, percentile(lat, 50), percentile(lat, 95), max(lat) if lat else float("nan"),
                         cpu / (audio_seconds * args.rounds)))
        items = librivox()
        testdata = "/usr/share/pocketsphinx/test/data/librivox"
        files = [os.path.join(testdata, n + ".wav") for n, _, _ in items]
        files.append(os.path.join(ROOT, "Tests", "StenoSpeechTests", "Resources", "beckett.wav"))
        refs = [ref for _, _, ref in items] + [None]
        rest_audio = sum(wave.open(f).getnframes() / wave.open(f).getframerate() for f in files)
        before, started = server_cpu(process), time.monotonic()
        texts = rest(port, files)
        rest_cpu, rest_wall = server_cpu(process) - before, time.monotonic() - started
        # Live speech while files are posted without a pause: uploads wait behind it.
        stop, count = threading.Event(), [0, 0]
        poster = threading.Thread(target=uploading, args=(port, files, stop, count), daemon=True)
        poster.start()
        loaded_errors = loaded_words = 0
        loaded_lat = []
        for _ in range(args.rounds):
            text, latencies = steno_live(port, path)
            loaded_errors += errors(reference, normalized(text))
            loaded_words += len(reference)
            loaded_lat += latencies
        stop.set()
        poster.join(60)
    finally:
        process.terminate()
        process.wait(30)
    rest_errors = sum(errors(r, normalized(t)) for r, t in zip(refs, texts) if r)
    rest_words = sum(len(r) for r in refs if r)

    from faster_whisper import WhisperModel
    model = WhisperModel(default_model(), device="cpu", compute_type="int8", cpu_threads=2)
    floor_live, floor_live_cpu = floor(model, [(read_wav(path), reference)], beam=5)
    os.unlink(path)
    floor_rest, floor_rest_cpu = floor(model, [(s, r) for (_, s, r) in items], beam=5)

    print(f"Interop, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} cores, Whisper tiny.en; live: the LibriVox reading "
          f"({audio_seconds:.1f} s, {len(reference)} words) at real time, {args.rounds} round(s)")
    print()
    print("| live API | WER | finals after their audio end p50 / p95 / max | server CPU s per audio s |")
    print("|---|---|---|---|")
    for name, wer, p50, p95, top, cpu in rows:
        print(f"| {name} | {wer:.1f} % | {p50:.2f} / {p95:.2f} / {top:.2f} s | {cpu:.2f} |")
    print(f"| Steno's protocol while files are posted without a pause ({count[0]} answered, {count[1]} refused) | "
          f"{100 * loaded_errors / loaded_words:.1f} % | {percentile(loaded_lat, 50):.2f} / {percentile(loaded_lat, 95):.2f} / "
          f"{max(loaded_lat) if loaded_lat else float('nan'):.2f} s | |")
    print(f"| the batch floor (same audio, beam 5) | {100 * floor_live:.1f} % | | {floor_live_cpu:.2f} |")
    print()
    print("| REST upload (OpenAI's /v1/audio/transcriptions) | WER (LibriVox) | audio hours per CPU hour | wall s per audio s |")
    print("|---|---|---|---|")
    print(f"| Steno, {len(files)} files, {rest_audio:.1f} s | {100 * rest_errors / rest_words:.1f} % | "
          f"{rest_audio / rest_cpu:.1f} | {rest_wall / rest_audio:.2f} |")
    print(f"| the batch floor (LibriVox, beam 5) | {100 * floor_rest:.1f} % | {1 / floor_rest_cpu:.1f} | |")


if __name__ == "__main__":
    main()
