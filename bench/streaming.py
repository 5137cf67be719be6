#!/usr/bin/env python3
"""Streaming benchmark: the labelled sets captioned through `steno serve` at real time, one
talker at a time, by each engine, beside the same Whisper model's batch transcription of each
whole file (the floor), in one run. Prints WER per set, the latency of volatiles and finals,
and CPU per audio second.

    .venv/bin/python bench/streaming.py [--steno .build/release/steno] [--engines whisper,pocketsphinx]

Latency is read on the client's clock: `steno send` sends a WAV at real time from its `ready`
on, so audio time t was sent at ready + t. A volatile's lag is its arrival minus the sending
of its end; a final's is its arrival minus the sending of its last word's end (where the
speaker stopped), so it includes the silence the engine waits for before it ends an utterance."""

import argparse
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from worker_client import TESTDATA, cards, default_model, errors, floor, librivox, normalized, read_wav  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TICK = os.sysconf("SC_CLK_TCK")


def transcription(path):
    refs = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"<s> (.*) </s> \((.*)\)", line.strip())
            if m:
                refs[m.group(2)] = m.group(1).lower().split()
    return refs


def sets():
    """(set, [(path, reference words)])."""
    out = {"librivox": [(os.path.join(TESTDATA, "librivox", n + ".wav"), ref) for n, _, ref in librivox()],
           "cards": [(os.path.join(TESTDATA, "cards", n + ".wav"), ref) for n, _, ref in cards()]}
    tts = os.path.join(ROOT, "bench", "phrases", "tts")
    out["synthetic"] = [(os.path.join(tts, n + ".wav"), ref) for n, ref in sorted(transcription(os.path.join(tts, "transcription")).items())]
    beckett = transcription(os.path.join(ROOT, "bench", "speech", "transcription"))["beckett"]
    out["beckett"] = [(os.path.join(ROOT, "Tests", "StenoSpeechTests", "Resources", "beckett.wav"), beckett)]
    return out


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def children(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(entry))
            except OSError:
                pass
    return out


def percentile(values, p):
    if not values:
        return float("nan")
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def serve(steno, engine):
    process = subprocess.Popen([steno, "serve", "--engine", engine, "--port", "0", "--idle-timeout", "0",
                                "--log-level", "warning", "--web-root", "/nonexistent"],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    for line in process.stdout:
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return process, int(m.group(1))
    raise RuntimeError("steno serve did not start")


def stream(steno, port, path):
    """The words of the finals, and the lags of volatiles and finals (seconds)."""
    send = subprocess.Popen([steno, "send", path, "--server", f"ws://127.0.0.1:{port}", "--format", "jsonl",
                             "--log-level", "error"], stdout=subprocess.PIPE, text=True)
    ready = None
    words, volatile, final = [], [], []
    for line in send.stdout:
        now = time.monotonic()
        event = json.loads(line)
        if event.get("type") == "ready":
            ready = now
        elif ready is not None and event.get("type") == "volatile" and event.get("text"):
            volatile.append(now - ready - event["end"])
        elif ready is not None and event.get("type") == "final":
            words += normalized(event["text"])
            spoken = event["words"][-1]["end"] if event.get("words") else event["end"]
            final.append(now - ready - spoken)
    send.wait()
    return words, volatile, final


def main():
    parser = argparse.ArgumentParser()
    release = os.path.join(ROOT, ".build", "release", "steno")
    parser.add_argument("--steno", default=release if os.path.exists(release) else os.path.join(ROOT, ".build", "debug", "steno"))
    parser.add_argument("--engines", default="whisper,pocketsphinx")
    args = parser.parse_args()
    labelled = sets()
    rows = []

    from faster_whisper import WhisperModel
    model = WhisperModel(default_model(), device="cpu", compute_type="int8", local_files_only=True)
    for name, items in labelled.items():
        wer, cpu = floor(model, [(read_wav(path), ref) for path, ref in items])
        rows.append((name, "whisper batch (floor)", wer, None, None, cpu))
    del model

    for engine in args.engines.split(","):
        process, port = serve(args.steno, engine)
        try:
            time.sleep(1)
            pids = [process.pid] + children(process.pid)
            for name, items in labelled.items():
                before = sum(cpu_seconds(p) for p in pids)
                errs = total = 0
                audio = 0.0
                volatiles, finals = [], []
                for path, ref in items:
                    heard, volatile, final = stream(args.steno, port, path)
                    errs += errors(ref, heard)
                    total += len(ref)
                    audio += len(read_wav(path)) / 16000
                    volatiles += volatile
                    finals += final
                spent = sum(cpu_seconds(p) for p in pids) - before
                rows.append((name, f"{engine} through steno serve", errs / total, volatiles, finals, spent / audio))
        finally:
            process.terminate()
            process.wait()

    print(f"{'set':10} {'what':30} {'WER':>6} {'volatile p50/p95 s':>19} {'final p50/p95 s':>16} {'CPU s/audio s':>13}")
    for name, what, wer, volatile, final, cpu in rows:
        v = f"{percentile(volatile, 50):.2f}/{percentile(volatile, 95):.2f}" if volatile else "-"
        f = f"{percentile(final, 50):.2f}/{percentile(final, 95):.2f}" if final else "-"
        print(f"{name:10} {what:30} {wer*100:5.1f}% {v:>19} {f:>16} {cpu:13.3f}")


if __name__ == "__main__":
    main()
