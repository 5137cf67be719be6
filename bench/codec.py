#!/usr/bin/env python3
"""What the codec changes in what Whisper hears (bench/README.md, "Noisy speech"): the batch floor
(faster-whisper, tiny.en, beam 5, conditioned on the text before) of each noise bench reading
over PCM, against the same reading through Opus as a client would send it (`steno-bench opus`:
20 ms packets at each bitrate, with DTX as `steno send` sends or without, libopus' VoIP
application or its general audio one, decoded at 16 kHz as the server does). Prints the words
in 100 that differ from PCM's, and the WER of each, per condition. No streaming: the codec
alone, so that "Opus against PCM" in the noise bench can be read against it. The variant `shift`
is no codec: the PCM 6.5 ms later (Opus's own delay), for how much a mere offset moves the words.

    .venv/bin/python bench/codec.py [--noises clean,pink-10,babble-10] [--variants 32000,32000-nodtx,32000-audio,64000,shift]
"""

import argparse
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import noisy_sets  # noqa: E402
import streaming  # noqa: E402
from worker_client import default_model, errors, normalized, read_wav  # noqa: E402

ROOT = noisy_sets.ROOT


def through_opus(steno_bench, path, variant, folder):
    """`path` as the server hears it sent with `variant` ("48000", "32000-nodtx", "32000-audio")."""
    bitrate, _, flag = variant.partition("-")
    out = os.path.join(folder, "codec", variant, os.path.basename(path))
    if not os.path.exists(out) or os.path.getmtime(out) < os.path.getmtime(path):
        os.makedirs(os.path.dirname(out), exist_ok=True)
        subprocess.run([steno_bench, "opus", path, out, "--bitrate", bitrate] + {"nodtx": ["--no-dtx"], "audio": ["--audio"]}.get(flag, []),
                       check=True, stdout=subprocess.DEVNULL)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steno-bench", default=os.path.join(ROOT, ".build", "release", "steno-bench"))
    parser.add_argument("--folder", default=os.path.join(ROOT, ".build", "noisy"), help="where bench/noisy_sets.py wrote the audio")
    parser.add_argument("--sets", default="librivox,cards,synthetic,beckett")
    parser.add_argument("--noises", default="clean,pink-10,babble-10")
    parser.add_argument("--variants", default="32000,32000-nodtx,32000-audio,64000,shift")
    args = parser.parse_args()
    if not os.path.exists(os.path.join(args.folder, "transcription")):
        noisy_sets.make(args.folder)
    refs = streaming.transcription(os.path.join(args.folder, "transcription"))
    from faster_whisper import WhisperModel
    model = WhisperModel(default_model(), device="cpu", compute_type="int8", local_files_only=True)

    def heard(path, shift=0):
        samples = read_wav(path)
        if shift:
            samples = np.concatenate([np.zeros(shift, dtype=samples.dtype), samples])[:len(samples)]
        segments, _ = model.transcribe(samples, language="en", beam_size=5, condition_on_previous_text=True)
        return normalized(" ".join(s.text for s in segments))

    variants = args.variants.split(",")
    print(f"{'condition':12} {'words':>5} {'PCM WER':>8} | " + " | ".join(f"{v:>13} differ, WER" for v in variants))
    for noise in args.noises.split(","):
        total, pcm_errors = 0, 0
        differ = {v: 0 for v in variants}
        wrong = {v: 0 for v in variants}
        for name in args.sets.split(","):
            label = f"{name}-{noise}"
            path = os.path.join(args.folder, label + ".wav")
            pcm = heard(path)
            total += len(pcm)
            pcm_errors += errors(refs[label], pcm)
            for v in variants:
                words = heard(path, shift=104) if v == "shift" else heard(through_opus(args.steno_bench, path, v, args.folder))
                differ[v] += errors(pcm, words)
                wrong[v] += errors(refs[label], words)
        n = sum(len(refs[f"{s}-{noise}"]) for s in args.sets.split(","))
        cells = " | ".join(f"{differ[v] / max(1, total) * 100:13.1f} {wrong[v] / n * 100:6.1f} %" for v in variants)
        print(f"{noise:12} {total:5d} {pcm_errors / n * 100:7.1f} % | {cells}", flush=True)


if __name__ == "__main__":
    main()
