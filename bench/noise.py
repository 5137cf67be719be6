#!/usr/bin/env python3
"""The noise bench: each labelled set as one reading, clean and with pink noise, babble and a
music bed at 20, 10 and 5 dB SNR (bench/noisy_sets.py makes them), streamed through
`steno serve` by `steno send` one session each, against the same model's batch transcription
of the same decoded audio (the floor: faster-whisper, beam 5, conditioned on the text before,
as its defaults are; over Opus, of what the server decodes: `steno-bench opus`). Prints, per
reading and pooled over the sets of each condition, the WER of the floor and of each server
configuration, the finals' lag after their last word (p50/p95/max), and the server's CPU (its
Whisper worker's included) per audio second.

    .venv/bin/python bench/noise.py [--sets librivox,cards,synthetic,beckett]
        [--noises clean,pink-10,babble-10,...] [--encodings opus,pcm] [--fast]
        [--config NAME='steno serve options' ...] [--no-floor]
    .venv/bin/python bench/noise.py --alone [--config ...]   # ten minutes of each noise alone: words heard

A final's lag is its arrival minus the sending of its last word's end (steno send sends at
real time from `ready`); with `--fast` (sent as fast as the server takes it) lags mean nothing
and are not shown.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
import noisy_sets  # noqa: E402
import streaming  # noqa: E402
from worker_client import default_model, errors, floor, normalized, read_wav  # noqa: E402

ROOT = noisy_sets.ROOT
NOISES = ["clean"] + [f"{kind}-{snr}" for kind in noisy_sets.KINDS for snr in noisy_sets.SNRS]


def references(folder):
    return streaming.transcription(os.path.join(folder, "transcription"))


def decoded(steno_bench, path, encoding, folder):
    """The audio the server hears of `path` sent with `encoding`."""
    if encoding == "pcm":
        return path
    out = os.path.join(folder, "opus", os.path.basename(path))
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(path):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run([steno_bench, "opus", path, out], check=True, stdout=subprocess.DEVNULL)
    return out


def summary(lags):
    if not lags:
        return "-"
    return f"{streaming.percentile(lags, 50):.2f}/{streaming.percentile(lags, 95):.2f}/{max(lags):.2f}"


def run_configs(args, readings, refs):
    """{(config, encoding, reading): (words, final lags, cpu s, audio s)}."""
    out = {}
    for name, options in args.config:
        process, port = streaming.serve(args.steno, "whisper", ("--idle-timeout", "0", *shlex.split(options)))
        try:
            time.sleep(1)
            pids = [process.pid] + streaming.children(process.pid)
            for encoding in args.encodings:
                for label in readings:
                    path = os.path.join(args.folder, label + ".wav")
                    before = sum(streaming.cpu_seconds(p) for p in pids)
                    extra = ["--encoding", encoding] + (["--fast"] if args.fast else [])
                    words, _, lags = streaming.stream(args.steno, port, path, extra=extra)
                    spent = sum(streaming.cpu_seconds(p) for p in pids) - before
                    out[(name, encoding, label)] = (words, lags, spent, len(read_wav(path)) / 16000)
                    print(f"  {name} {encoding} {label}: {errors(refs[label], words)}/{len(refs[label])} errors,"
                          f" finals {summary(lags)}", file=sys.stderr, flush=True)
        finally:
            process.terminate()
            process.wait()
    return out


def floors(args, readings, refs):
    """{(encoding, reading): errors} of the batch floor."""
    from faster_whisper import WhisperModel
    model = WhisperModel(default_model(), device="cpu", compute_type="int8", local_files_only=True)
    out = {}
    for encoding in args.encodings:
        for label in readings:
            audio = read_wav(decoded(args.steno_bench, os.path.join(args.folder, label + ".wav"), encoding, args.folder))
            wer, _ = floor(model, [(audio, refs[label])], beam=5, previous_text=True)
            out[(encoding, label)] = round(wer * len(refs[label]))
    return out


def table(args, readings, refs, runs, floor_errors):
    columns = [(name, encoding) for name, _ in args.config for encoding in args.encodings]
    head = f"{'reading':22} {'enc':4} {'floor':>6}"
    for name, _ in args.config:
        head += f" | {name[:18]:18} {'WER':>6} {'finals p50/p95/max s':>20} {'CPU':>5}"
    print(head)
    groups = {}
    for label in readings:
        condition = label.split("-", 1)[1]
        groups.setdefault(condition, []).append(label)
    for condition, labels in groups.items():
        for encoding in args.encodings:
            for label in labels + (["all " + condition] if len(labels) > 1 else []):
                members = labels if label.startswith("all ") else [label]
                total = sum(len(refs[m]) for m in members)
                fl = floor_errors.get((encoding, members[0]))
                fl = sum(floor_errors[(encoding, m)] for m in members) / total * 100 if fl is not None else None
                row = f"{label:22} {encoding:4} {('%5.1f%%' % fl) if fl is not None else '     -':>6}"
                for name, _ in args.config:
                    if (name, encoding) not in columns:
                        continue
                    got = [runs[(name, encoding, m)] for m in members]
                    errs = sum(errors(refs[m], g[0]) for m, g in zip(members, got))
                    lags = [lag for g in got for lag in g[1]]
                    cpu = sum(g[2] for g in got) / sum(g[3] for g in got)
                    row += f" | {'':18} {errs / total * 100:5.1f}% {('-' if args.fast else summary(lags)):>20} {cpu:5.2f}"
                print(row, flush=True)


def alone(args):
    """Each noise alone, sent fast: the words its finals held (there should be none)."""
    print(f"{'noise alone':14} {'minutes':>7}" + "".join(f" | {name[:18]:18} {'words':>5} {'finals':>6}" for name, _ in args.config))
    results = {}
    for name, options in args.config:
        try:
            process, port = streaming.serve(args.steno, "whisper", ("--idle-timeout", "0", *shlex.split(options)))
        except RuntimeError as error:
            print(f"  {name}: {error}", file=sys.stderr)
            args.config = [c for c in args.config if c[0] != name]
            continue
        try:
            for kind in ("music", "applause", "pink"):
                path = os.path.join(args.folder, f"noise-{kind}.wav")
                words, _, lags = streaming.stream(args.steno, port, path, extra=["--fast", "--encoding", args.encodings[0]])
                results[(name, kind)] = (words, len(lags))
                if words:
                    print(f"  {name} {kind}: {' '.join(words)[:300]}", file=sys.stderr)
        finally:
            process.terminate()
            process.wait()
    for kind in ("music", "applause", "pink"):
        minutes = len(read_wav(os.path.join(args.folder, f"noise-{kind}.wav"))) / 16000 / 60
        print(f"{kind:14} {minutes:7.1f}" + "".join(f" | {'':18} {len(results[(n, kind)][0]):5d} {results[(n, kind)][1]:6d}"
                                               for n, _ in args.config))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    release = os.path.join(ROOT, ".build", "release", "steno")
    parser.add_argument("--steno", default=release if os.path.exists(release) else os.path.join(ROOT, ".build", "debug", "steno"))
    parser.add_argument("--steno-bench", default=os.path.join(ROOT, ".build", "release", "steno-bench"),
                        help="steno-bench, for what the server hears over Opus")
    parser.add_argument("--folder", default=os.path.join(ROOT, ".build", "noisy"), help="where bench/noisy_sets.py wrote the audio")
    parser.add_argument("--sets", default="librivox,cards,synthetic,beckett")
    parser.add_argument("--noises", default=",".join(NOISES))
    parser.add_argument("--encodings", default="opus", help="opus, pcm or both")
    parser.add_argument("--fast", action="store_true", help="steno send --fast (WER only)")
    parser.add_argument("--config", action="append", default=[], metavar="NAME=OPTIONS",
                        help="a server configuration: a name and its steno serve options; repeatable (default: the defaults)")
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--alone", action="store_true", help="the noises alone, ten minutes each")
    parser.add_argument("--words", default=None, help="write each run's words to this JSON file")
    args = parser.parse_args()
    args.config = [tuple(c.split("=", 1)) if "=" in c else (c, "") for c in args.config] or [("default", "")]
    args.encodings = args.encodings.split(",")
    if not os.path.exists(os.path.join(args.folder, "transcription")):
        noisy_sets.make(args.folder)
    configurations = "; ".join(f"{n}: {o or 'defaults'}" for n, o in args.config)
    print(f"steno serve with Whisper tiny.en, {os.cpu_count()} cores, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())};"
          f" configurations: {configurations}")
    if args.alone:
        alone(args)
        return
    refs = references(args.folder)
    readings = [f"{s}-{n}" for n in args.noises.split(",") for s in args.sets.split(",")]
    missing = [r for r in readings if r not in refs]
    if missing:
        parser.error(f"no such reading: {', '.join(missing)}")
    floor_errors = {} if args.no_floor else floors(args, readings, refs)
    runs = run_configs(args, readings, refs)
    table(args, readings, refs, runs, floor_errors)
    if args.words:
        # Each run's words, to set runs side by side (real time against --fast, Opus against PCM).
        with open(args.words, "w") as f:
            json.dump({f"{name} {encoding} {label}": words for (name, encoding, label), (words, _, _, _) in runs.items()}, f)


if __name__ == "__main__":
    main()
