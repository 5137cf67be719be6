#!/usr/bin/env python3
"""Streaming benchmark: the labelled sets captioned through `steno serve` at real time, one
talker at a time, by each engine, beside the same Whisper model's batch transcription of each
whole file (the floor), in one run. Prints WER per set, the latency of volatiles and finals,
and CPU per audio second.

    .venv/bin/python bench/streaming.py [--steno .build/release/steno] [--engines whisper,pocketsphinx] [--phrases]
        [--sets librivox,cards,synthetic,beckett]
    .venv/bin/python bench/streaming.py --talkers 1,2,4,6 [--engine whisper] [--admission]

`--talkers` measures capacity instead: for each N, a fresh server and N talkers at once, each
sending the LibriVox sentences (1.5 s of silence between them, each talker in its own order)
at real time; the latency of their volatiles and finals, WER, the server's CPU (with its
worker's) per audio second, and what admission projected. Admission is off (so every N is
served and its latency seen) unless `--admission`: then the default options decide, and the
sessions refused (503, `overload`) are counted.

Latency is read on the client's clock: `steno send` sends a WAV at real time from its `ready`
on, so audio time t was sent at ready + t. A volatile's lag is its arrival minus the sending
of its end; a final's is its arrival minus the sending of its last word's end (where the
speaker stopped), so it includes the silence the engine waits for before it ends an utterance."""

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
import steno_serve  # noqa: E402
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


def serve(steno, engine, extra=()):
    return steno_serve.serve(steno, ["--engine", engine, "--idle-timeout", "0", *extra])


def stream(steno, port, path, launched=None, phrases=None, extra=()):
    """The words of the finals, and the lags of volatiles and finals (seconds); with
    `launched`, a dict that is given the seconds from launch to `ready` under "wait"; `extra`:
    more options for steno send (`--encoding pcm`, `--fast`: then the lags mean nothing)."""
    started = time.monotonic()
    # Every frame at its time: with pauses left out, steno send holds frames until its silence
    # gate has judged them, and audio time t would no longer be sent at ready + t.
    send = subprocess.Popen([steno, "send", path, "--server", f"ws://127.0.0.1:{port}", "--format", "jsonl",
                             "--log-level", "error", "--no-silence-suppression", *extra]
                            + (["--phrases", phrases] if phrases else []),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    ready = None
    words, volatile, final = [], [], []
    for line in send.stdout:
        now = time.monotonic()
        event = json.loads(line)
        if event.get("type") == "ready":
            ready = now
            if launched is not None:
                launched["wait"] = now - started
        elif ready is not None and event.get("type") == "volatile" and event.get("text"):
            volatile.append(now - ready - event["end"])
        elif ready is not None and event.get("type") == "final":
            words += normalized(event["text"])
            spoken = event["words"][-1]["end"] if event.get("words") else event["end"]
            final.append(now - ready - spoken)
    send.wait()
    return words, volatile, final


def metrics(port):
    """/metrics as {name (with labels): value}."""
    import urllib.request
    out = {}
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line and not line.startswith("#"):
                name, _, value = line.rpartition(" ")
                try:
                    out[name] = float(value)
                except ValueError:
                    pass
    return out


def reading(order, pause=1.5):
    """The LibriVox sentences in `order`, `pause` s of silence before each: a talker's WAV
    (written to a temporary file) and its reference words."""
    import tempfile
    import wave
    import numpy as np
    items = librivox()
    pcm, ref = [], []
    for i in order:
        _, samples, words = items[i % len(items)]
        pcm.append(np.zeros(int(pause * 16000), dtype=np.int16))
        pcm.append((np.clip(samples, -1, 1) * 32767).astype(np.int16))
        ref += words
    pcm.append(np.zeros(int(pause * 16000), dtype=np.int16))
    f = tempfile.NamedTemporaryFile(suffix=".wav", delete=False)
    with wave.open(f.name, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(np.concatenate(pcm).tobytes())
    return f.name, ref


def capacity(args):
    """The `--talkers` rounds (see the docstring)."""
    import threading
    counts = [int(n) for n in args.talkers.split(",")]
    count = len(librivox())
    print(f"{args.engine}, {os.cpu_count()} cores; each talker: the {count} LibriVox sentences, 1.5 s pauses, at real time;"
          f" admission {'on (default options)' if args.admission else 'off'}")
    print(f"{'talkers':>7} {'served':>6} {'refused':>7} {'WER':>6} {'volatile p50/p95 s':>19} {'final p50/p95 s':>16}"
          f" {'s of speech/volatile':>20} {'CPU s/audio s':>13} {'projected':>9} {'speech cost':>11}")
    pooled = {}  # talkers -> (rounds, volatile lags, final lags)
    for n in counts:
        extra = (() if args.admission else ("--admit-utilization", "0", "--lag-target", "0")) + tuple(shlex.split(args.serve_args))
        process, port = serve(args.steno, args.engine, extra)
        try:
            time.sleep(1)
            pids = [process.pid] + children(process.pid)
            talkers = [reading([(k + i) % count for i in range(count)]) for k in range(n)]
            audio = sum(len(read_wav(path)) / 16000 for path, _ in talkers)
            results = [None] * n
            waits = [dict() for _ in range(n)]
            before = sum(cpu_seconds(p) for p in pids)

            def talk(k):
                time.sleep(0.4 * k)  # arrivals spread over a few seconds, as people join
                results[k] = stream(args.steno, port, talkers[k][0], waits[k])
            threads = [threading.Thread(target=talk, args=(k,)) for k in range(n)]
            for t in threads:
                t.start()
            # What admission projects once every talker is in and speaking.
            time.sleep(0.4 * n + 12)
            seen = metrics(port)
            for t in threads:
                t.join()
            spent = sum(cpu_seconds(p) for p in pids) - before
            refused = seen.get('steno_handshakes_refused_total{reason="overload"}', 0)
            served = [k for k in range(n) if waits[k].get("wait", 99) < 1.5]
            errs = sum(errors(talkers[k][1], results[k][0]) for k in served)
            total = sum(len(talkers[k][1]) for k in served) or 1
            volatile = [v for k in served for v in results[k][1]]
            final = [f for k in served for f in results[k][2]]
            v = f"{percentile(volatile, 50):.2f}/{percentile(volatile, 95):.2f}" if volatile else "-"
            f = f"{percentile(final, 50):.2f}/{percentile(final, 95):.2f}" if final else "-"
            # How often a reader's volatile words change: seconds of speech per volatile shown.
            speech = len(served) * sum(len(samples) for _, samples, _ in librivox()) / 16000
            print(f"{n:7d} {len(served):6d} {int(refused):7d} {errs / total * 100:5.1f}% {v:>19} {f:>16}"
                  f" {speech / max(1, len(volatile)):20.2f} {spent / audio:13.3f} {seen.get('steno_admission_utilization', float('nan')):9.2f}"
                  f" {seen.get('steno_admission_speech_cost', float('nan')):11.3f}", flush=True)
            rounds, volatiles, finals = pooled.get(n, (0, [], []))
            pooled[n] = (rounds + 1, volatiles + volatile, finals + final)
            for path, _ in talkers:
                os.unlink(path)
        finally:
            process.terminate()
            process.wait()
    # A p95 of one round's 30-40 finals is its second or third largest: rounds of the same
    # count pooled say it more steadily.
    again = {n: p for n, p in pooled.items() if p[0] > 1}
    if again:
        print(f"{'talkers':>7} {'rounds':>6} {'finals':>6} {'volatile p50/p95 s':>19} {'final p50/p95 s':>16}  (rounds pooled)")
        for n, (rounds, volatile, final) in sorted(again.items()):
            v = f"{percentile(volatile, 50):.2f}/{percentile(volatile, 95):.2f}" if volatile else "-"
            f = f"{percentile(final, 50):.2f}/{percentile(final, 95):.2f}" if final else "-"
            print(f"{n:7d} {rounds:6d} {len(final):6d} {v:>19} {f:>16}", flush=True)


def main():
    parser = argparse.ArgumentParser()
    release = os.path.join(ROOT, ".build", "release", "steno")
    parser.add_argument("--steno", default=release if os.path.exists(release) else os.path.join(ROOT, ".build", "debug", "steno"))
    parser.add_argument("--engines", default="whisper,pocketsphinx")
    parser.add_argument("--talkers", default=None, help="capacity rounds of these many talkers at once, e.g. 1,2,4,6")
    parser.add_argument("--engine", default="whisper", help="the engine of the --talkers rounds")
    parser.add_argument("--admission", action="store_true", help="--talkers with admission on (default options)")
    parser.add_argument("--serve-args", default="", help="more options for steno serve, e.g. \"--decoder '-vad_postspeech 30'\"")
    parser.add_argument("--no-floor", action="store_true", help="leave out the batch floor (its rows of another run stand)")
    parser.add_argument("--phrases", action="store_true",
                        help="also stream librivox and synthetic with their phrase lists (bench/phrases), each with the "
                             "other's (false alarms), and cards and beckett with both")
    parser.add_argument("--sets", default=None, help="only these labelled sets, e.g. beckett,cards")
    args = parser.parse_args()
    if args.talkers:
        capacity(args)
        return
    labelled = sets()
    if args.sets:
        wanted = args.sets.split(",")
        unknown = [name for name in wanted if name not in labelled]
        if unknown:
            parser.error(f"no set {', '.join(unknown)}: the sets are {', '.join(labelled)}")
        labelled = {name: labelled[name] for name in wanted}
    rows = []

    if not args.no_floor:
        from faster_whisper import WhisperModel
        model = WhisperModel(default_model(), device="cpu", compute_type="int8", local_files_only=True)
        for name, items in labelled.items():
            wer, cpu = floor(model, [(read_wav(path), ref) for path, ref in items])
            rows.append((name, "whisper batch (floor)", wer, None, None, cpu))
        del model

    for engine in args.engines.split(","):
        process, port = serve(args.steno, engine, shlex.split(args.serve_args))
        try:
            time.sleep(1)
            pids = [process.pid] + children(process.pid)
            runs = [(name, items, None, "") for name, items in labelled.items()]
            if args.phrases:
                lists = {name: os.path.join(ROOT, "bench", "phrases", f"phrases-{file}.txt")
                         for name, file in (("librivox", "librivox"), ("synthetic", "tts"))}
                both = os.path.join("/tmp", f"steno-phrases-both-{os.getpid()}.txt")
                with open(both, "w") as f:
                    for path in lists.values():
                        with open(path) as part:
                            f.write(part.read() + "\n")
                # Each set with its own list; then false alarms: each with the other's list,
                # and the sets that say none of the phrases with both lists.
                runs += [(name, labelled[name], path, ", its phrases") for name, path in lists.items() if name in labelled]
                runs += [(name, labelled[name], lists[other], ", the other's phrases")
                         for name, other in (("librivox", "synthetic"), ("synthetic", "librivox")) if name in labelled]
                runs += [(name, labelled[name], both, ", both lists") for name in ("cards", "beckett") if name in labelled]
            for name, items, phrases, label in runs:
                before = sum(cpu_seconds(p) for p in pids)
                errs = total = 0
                audio = 0.0
                volatiles, finals = [], []
                for path, ref in items:
                    heard, volatile, final = stream(args.steno, port, path, phrases=phrases)
                    errs += errors(ref, heard)
                    total += len(ref)
                    audio += len(read_wav(path)) / 16000
                    volatiles += volatile
                    finals += final
                spent = sum(cpu_seconds(p) for p in pids) - before
                what = f"{engine} through steno serve" + label
                rows.append((name, what, errs / total, volatiles, finals, spent / audio))
        finally:
            process.terminate()
            process.wait()

    print(f"{'set':10} {'what':55} {'WER':>6} {'volatile p50/p95 s':>19} {'final p50/p95 s':>16} {'CPU s/audio s':>13}")
    for name, what, wer, volatile, final, cpu in rows:
        v = f"{percentile(volatile, 50):.2f}/{percentile(volatile, 95):.2f}" if volatile else "-"
        f = f"{percentile(final, 50):.2f}/{percentile(final, 95):.2f}" if final else "-"
        print(f"{name:10} {what:55} {wer*100:5.1f}% {v:>19} {f:>16} {cpu:13.3f}")


if __name__ == "__main__":
    main()
