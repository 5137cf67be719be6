#!/usr/bin/env python3
"""The noise bench's audio (bench/README.md, "Noisy speech"), made from audio the
repository has, nothing downloaded, the same bytes every time:

- each labelled set as one reading (its files one after another, a second of silence before
  each and after the last), clean and with noise added at 20, 10 and 5 dB SNR:
  - `pink`: pink noise (1/f), like fans, air conditioning, road noise;
  - `babble`: six other talkers at once, made of the repository's speech that is not in the
    set (the other sets and Beckett's Endgame dialogue), each looped from its own offset;
  - `music`: a synthetic music bed (chords, bass, a beat);
- noise alone, for "no text from noise": ten minutes each of `music`, `applause` (many claps)
  and `pink`.

The SNR is the speech's active level (the RMS of its 10 ms frames within 30 dB of its
loudest) against the noise's RMS; the noise runs through the pauses too, as it would.

    .venv/bin/python bench/noisy_sets.py [--out .build/noisy] [--minutes 10]

Writes OUT/SET-clean.wav, OUT/SET-KIND-SNR.wav (16 kHz mono s16), OUT/noise-KIND.wav and
OUT/transcription (the references, one line per reading, in pocketsphinx-testdata's format).
"""

import argparse
import os
import sys
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import streaming  # noqa: E402  (the labelled sets)

from worker_client import read_wav  # noqa: E402  (streaming puts Tests/whisper on the path)

RATE = 16000
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
KINDS = ("pink", "babble", "music")
SNRS = (20, 10, 5)
PAUSE = 1.0


def active_level(x):
    """RMS of the 10 ms frames within 30 dB of the loudest: the level of the speech, not of its pauses."""
    frames = x[: len(x) // 160 * 160].reshape(-1, 160)
    rms = np.sqrt((frames.astype(np.float64) ** 2).mean(axis=1) + 1e-12)
    active = rms[rms >= rms.max() * 10 ** (-30 / 20)]
    return float(np.sqrt((active ** 2).mean()))


def unit(x):
    return x / np.sqrt((x.astype(np.float64) ** 2).mean() + 1e-20)


def pink(n, seed):
    rng = np.random.default_rng(seed)
    spectrum = np.fft.rfft(rng.standard_normal(n))
    spectrum /= np.sqrt(np.maximum(1, np.arange(len(spectrum))))
    return unit(np.fft.irfft(spectrum, n))


def babble(n, sources, seed, talkers=6):
    """`talkers` voices at once, each the sources in its own order from its own offset, at one level."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n)
    for _ in range(talkers):
        voice = np.concatenate([sources[i] for i in rng.permutation(len(sources))])
        voice = np.roll(voice / active_level(voice), -int(rng.integers(0, len(voice))))
        out += np.tile(voice, int(np.ceil(n / len(voice))))[:n]
    return unit(out)


def tone(freq, seconds, rng):
    t = np.arange(int(seconds * RATE)) / RATE
    envelope = np.minimum(1, t / 0.02) * np.exp(-t * rng.uniform(0.8, 1.6))
    return envelope * sum(np.sin(2 * np.pi * freq * k * t + rng.uniform(0, 6.28)) / k ** 1.5 for k in range(1, 6))


def music(n, seed):
    """Chords (I–V–vi–IV, two seconds each), a bass note a beat, a melody, a kick and a hi-hat."""
    rng = np.random.default_rng(seed)
    out = np.zeros(n + 4 * RATE)
    chords = [(261.6, 329.6, 392.0), (196.0, 246.9, 293.7), (220.0, 261.6, 329.6), (174.6, 220.0, 261.6)]
    beat = RATE // 2
    for b in range(0, n // beat + 1):
        at = b * beat
        chord = chords[(b // 4) % 4]
        if b % 4 == 0:
            for f in chord:
                piece = 0.3 * tone(f, 2.0, rng)
                out[at: at + len(piece)] += piece
        bass = 0.5 * tone(chord[0] / 2, 0.45, rng)
        out[at: at + len(bass)] += bass
        if rng.random() < 0.7:
            note = 0.25 * tone(chord[int(rng.integers(0, 3))] * 2, 0.4, rng)
            off = at + int(rng.integers(0, 2)) * beat // 2
            out[off: off + len(note)] += note
        t = np.arange(int(0.12 * RATE)) / RATE
        kick = np.sin(2 * np.pi * (60 + 80 * np.exp(-t * 30)) * t) * np.exp(-t * 25)
        out[at: at + len(kick)] += 0.8 * kick
        for half in (0, beat // 2):
            hat = rng.standard_normal(int(0.03 * RATE)) * np.exp(-np.arange(int(0.03 * RATE)) / 80)
            hat = np.diff(hat, prepend=0)  # bright
            out[at + half: at + half + len(hat)] += 0.15 * hat
    return unit(out[:n])


def applause(n, seed, rate=40):
    """Claps: short bright bursts of noise at random, about `rate` a second, over a low rustle."""
    rng = np.random.default_rng(seed)
    out = 0.05 * pink(n, seed + 1)
    length = int(0.015 * RATE)
    shape = np.exp(-np.arange(length) / (0.003 * RATE))
    for at in rng.integers(0, n - length, size=int(rate * n / RATE)):
        burst = np.diff(rng.standard_normal(length + 1)) * shape * rng.uniform(0.2, 1.0)
        out[at: at + length] += burst
    return unit(out)


def write(path, x):
    pcm = (np.clip(x, -1, 1) * 32767).astype("<i2")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes(pcm.tobytes())


def readings():
    """{set: (samples, reference words)}: each labelled set as one reading with pauses."""
    out = {}
    for name, items in streaming.sets().items():
        pieces, words = [], []
        for path, ref in items:
            pieces += [np.zeros(int(PAUSE * RATE)), read_wav(path)]
            words += ref
        out[name] = (np.concatenate(pieces + [np.zeros(int(PAUSE * RATE))]), words)
    return out


def make(out, minutes=10):
    os.makedirs(out, exist_ok=True)
    sets = readings()
    endgame = read_wav(os.path.join(ROOT, "bench", "speech", "endgame_nagg_nell_16k.wav"))
    lines = []
    for index, (name, (speech, words)) in enumerate(sets.items()):
        write(os.path.join(out, f"{name}-clean.wav"), speech)
        lines.append(f"<s> {' '.join(words)} </s> ({name}-clean)")
        # Babble of speech that is not this set's.
        others = [endgame] + [s for other, (s, _) in sets.items() if other != name]
        noises = {"pink": pink(len(speech), 100 + index), "babble": babble(len(speech), others, 200 + index),
                  "music": music(len(speech), 300 + index)}
        level = active_level(speech)
        for kind in KINDS:
            for snr in SNRS:
                label = f"{name}-{kind}-{snr}"
                mixed = speech + noises[kind] * level / 10 ** (snr / 20)
                # Kept below full scale as a recording would be.
                mixed *= min(1.0, 0.9 / np.max(np.abs(mixed)))
                write(os.path.join(out, label + ".wav"), mixed)
                lines.append(f"<s> {' '.join(words)} </s> ({label})")
    with open(os.path.join(out, "transcription"), "w") as f:
        f.write("\n".join(lines) + "\n")
    n = int(minutes * 60 * RATE)
    # Noise alone at an everyday level: -26 dBFS RMS, as loud as a talker.
    for kind, make_noise in (("music", music), ("applause", applause), ("pink", pink)):
        write(os.path.join(out, f"noise-{kind}.wav"), 0.05 * make_noise(n, 400 + len(kind)))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=os.path.join(ROOT, ".build", "noisy"))
    parser.add_argument("--minutes", type=float, default=10, help="length of each noise-alone file")
    args = parser.parse_args()
    print(make(args.out, args.minutes))


if __name__ == "__main__":
    main()
