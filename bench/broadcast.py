#!/usr/bin/env python3
"""How late captions reach OBS and YouTube after the words were spoken, and how much of
CEA-608's bandwidth speech needs (bench/README.md, "Captions into OBS and YouTube").

For each labelled set (bench/noisy_sets.py's clean readings), a `steno serve` (the default
engine, Whisper tiny.en) gets the reading at real time from `steno send` on a channel, while
`steno listen --obs … --youtube-url …` follows the channel and feeds the fakes of
obs-websocket 5 and YouTube's ingestion (scripts/fakes/, which record when each caption came).
A word is spoken at the broadcast's `startedAt` plus its end on the audio timeline; it reaches
`steno listen` with its final, OBS with the first caption holding it, YouTube with the first
POST holding it. Printed: p50/p95/max of each, over all words of all sets.

Then 608: the characters per second the speech needs (the finals' text over the reading's
length, and the busiest 10 s), against what CEA-608's caption channel carries (2 bytes a frame
at 29.97 fps): the server's pop-on SCC file of the same finals counts the pairs actually
needed, control codes included.

    .venv/bin/python bench/broadcast.py [--steno .build/release/steno] [--folder .build/noisy]
                                        [--sets librivox,cards,synthetic,beckett]
"""

import argparse
import calendar
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import wave

sys.path.insert(0, os.path.dirname(__file__))
from steno_serve import ROOT, serve  # noqa: E402

FPS = 30000 / 1001


def words(text):
    return re.findall(r"[a-z0-9']+", text.lower())


def fake(script, arguments, record):
    process = subprocess.Popen([sys.executable, os.path.join(ROOT, "scripts", "fakes", script), "--port", "0",
                                "--record", record, "--quiet", *arguments],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    port = int(process.stdout.readline().split()[1])
    return process, port


def records(path):
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def arrivals(final_words, captions):
    """For each final word in order, when the first caption holding it came: captions are
    (time, text) in order; words are matched in sequence (a word missing from the captions
    is skipped)."""
    out = []
    stream = [(t, w) for t, text in captions for w in words(text)]
    at = 0
    for word in final_words:
        k = at
        while k < len(stream) and stream[k][1] != word:
            k += 1
        if k < len(stream):
            out.append(stream[k][0])
            at = k + 1
        else:
            out.append(None)
    return out


def percentiles(values):
    values = sorted(v for v in values if v is not None)
    if not values:
        return "-", "-", "-"
    pick = lambda q: values[min(len(values) - 1, int(q * len(values)))]
    return f"{pick(0.5):.2f}", f"{pick(0.95):.2f}", f"{values[-1]:.2f}"


def run_set(args, port, label):
    wav = os.path.join(args.folder, f"{label}-clean.wav")
    channel = f"bench-{label}-{os.getpid()}"
    work = f"/tmp/steno-broadcast-bench-{os.getpid()}-{label}"
    os.makedirs(work, exist_ok=True)
    obs, obs_port = fake("obs_websocket.py", ["--streaming"], f"{work}/obs.jsonl")
    youtube, youtube_port = fake("youtube_ingest.py", ["--cid", "KEY"], f"{work}/youtube.jsonl")
    listen = subprocess.Popen([args.steno, "listen", "--channel", channel, "--server", f"ws://127.0.0.1:{port}",
                               "--format", "jsonl", "--obs", f"ws://127.0.0.1:{obs_port}",
                               "--youtube-url", f"http://127.0.0.1:{youtube_port}/closedcaption?cid=KEY"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    events = []

    def read():
        for line in listen.stdout:
            events.append((time.time(), json.loads(line)))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(1.5)
    subprocess.run([args.steno, "send", wav, "--server", f"ws://127.0.0.1:{port}", "--channel", channel],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    time.sleep(12)  # the last captions: paced into OBS, posted to YouTube
    listen.send_signal(signal.SIGINT)
    listen.wait(timeout=30)
    for process in (obs, youtube):
        process.send_signal(signal.SIGINT)
        process.wait(timeout=10)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/channels/{channel}/captions.scc") as response:
        scc = response.read().decode()
    return events, records(f"{work}/obs.jsonl"), records(f"{work}/youtube.jsonl"), scc, wav


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steno", default=os.path.join(ROOT, ".build/release/steno"))
    parser.add_argument("--folder", default=os.path.join(ROOT, ".build/noisy"))
    parser.add_argument("--sets", default="librivox,cards,synthetic,beckett")
    parser.add_argument("--serve-args", default="", help="more `steno serve` arguments, e.g. '--engine pocketsphinx'")
    args = parser.parse_args()
    server, port = serve(args.steno, args.serve_args.split())
    lags = {"final": [], "OBS": [], "YouTube": []}
    chars = 0
    seconds = 0.0
    pairs = 0
    busiest = 0.0
    try:
        for label in args.sets.split(","):
            events, obs, youtube, scc, wav = run_set(args, port, label)
            joined = [e for _, e in events if e["type"] == "joined"]
            started = joined[-1]["startedAt"]
            t0 = calendar.timegm(time.strptime(started[:19], "%Y-%m-%dT%H:%M:%S")) + float("0" + started[19:-1])
            finals = [(t, e) for t, e in events if e["type"] == "final"]
            spoken, received = [], []
            for t, final in finals:
                for word in final.get("words", []):
                    for w in words(word["word"]):
                        spoken.append((w, t0 + word["end"]))
                        received.append(t)
            final_words = [w for w, _ in spoken]
            shown = arrivals(final_words, [(r["t"], r["text"]) for r in obs if r.get("text")])
            posted = arrivals(final_words, [(r["received"], " ".join(r["text"])) for r in youtube if "text" in r])
            for (w, at), got, in_obs, in_youtube in zip(spoken, received, shown, posted):
                lags["final"].append(got - at)
                lags["OBS"].append(None if in_obs is None else in_obs - at)
                lags["YouTube"].append(None if in_youtube is None else in_youtube - at)
            missing = sum(x is None for x in shown), sum(x is None for x in posted)
            print(f"{label}: {len(final_words)} words; not in OBS {missing[0]}, not on YouTube {missing[1]}", file=sys.stderr)
            # 608: the speech's characters and the SCC's pairs.
            with wave.open(wav) as w:
                duration = w.getnframes() / w.getframerate()
            text = [(e["start"], e["end"], e["text"]) for _, e in finals]
            chars += sum(len(t) + 1 for _, _, t in text)
            seconds += duration
            for start in range(0, max(1, int(duration) - 9)):
                window = sum(len(t) + 1 for s, e, t in text if start <= s < start + 10)
                busiest = max(busiest, window / 10)
            pairs += sum(len(line.split("\t")[1].split()) for line in scc.splitlines() if "\t" in line)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    print("| words reach | p50 (s) | p95 (s) | max (s) |")
    print("|---|---|---|---|")
    for name, values in lags.items():
        p50, p95, top = percentiles(values)
        print(f"| {name} | {p50} | {p95} | {top} |")
    print()
    print("| CEA-608 | per second |")
    print("|---|---|")
    print(f"| characters the speech needs (mean) | {chars / seconds:.1f} |")
    print(f"| characters the speech needs (busiest 10 s) | {busiest:.1f} |")
    print(f"| pairs its pop-on SCC uses (control codes included) | {pairs / seconds:.1f} of {FPS:.2f} ({100 * pairs / seconds / FPS:.0f} %) |")
    print(f"| characters 608 carries at most (2 a frame) | {2 * FPS:.1f} |")


if __name__ == "__main__":
    main()
