#!/usr/bin/env python3
"""A translation's original (bench/README.md, "Every language"): what a translated final costs
when it also brings what was said (`"original": true`, the same audio transcribed in the same
batch), and whether that original reads as a transcription of its own would. The worker alone.

Each reading of bench/languages.py (festival's voices), sentence by sentence as the stream would
cut it (0.5 s before, 0.2 s after), heard by Whisper base (beam 5, words, the language given):
translated alone, translated with its original, and transcribed alone. Per language: the
worker's CPU seconds for the finals each way, and the WER of the original and of the
transcription against the sentences' text.

    .venv/bin/python bench/translation.py [--languages it,cs,ca,fi,ru]
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from audio_context import RATE, sentences  # noqa: E402
from languages import words  # noqa: E402
from steno_serve import ROOT  # noqa: E402
from worker_client import Worker, errors  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--languages", default="it,cs,ca,fi,ru")
    args = parser.parse_args()
    worker = Worker("--model", os.path.join(ROOT, ".venv/models/whisper-base"))
    before, after = np.zeros(RATE // 2, dtype=np.float32), np.zeros(RATE // 5, dtype=np.float32)
    print("Whisper base, each sentence a final: worker CPU s (translated / + original / transcribed), WER (errors / words)")
    print(f"{'language':<10}{'finals':>7}{'translated':>12}{'+ original':>12}{'ratio':>7}{'transcribed':>13}"
          f"{'original WER':>16}{'transcribed WER':>18}")
    with tempfile.TemporaryDirectory() as folder:
        for language in args.languages.split(","):
            options = {"words": True, "beam": 5, "priority": 2, "language": language}
            cpu = {"translated": 0.0, "both": 0.0, "transcribed": 0.0}
            original_errors = transcribed_errors = total = count = 0
            for samples, ref in sentences(language, folder):
                utterance = np.concatenate([before, samples, after])
                cpu["translated"] += worker.transcribe(utterance, task="translate", **options)["seconds"]
                both = worker.transcribe(utterance, task="translate", original=True, **options)
                cpu["both"] += both["seconds"]
                alone = worker.transcribe(utterance, **options)
                cpu["transcribed"] += alone["seconds"]
                original_errors += errors(ref, words(both["original"]["text"]))
                transcribed_errors += errors(ref, words(alone["text"]))
                total += len(ref)
                count += 1
            print(f"{language:<10}{count:>7}{cpu['translated']:>12.2f}{cpu['both']:>12.2f}"
                  f"{cpu['both'] / max(cpu['translated'], 1e-9):>7.2f}{cpu['transcribed']:>13.2f}"
                  f"{f'{100 * original_errors / total:.1f} % ({original_errors}/{total})':>16}"
                  f"{f'{100 * transcribed_errors / total:.1f} % ({transcribed_errors}/{total})':>18}", flush=True)


if __name__ == "__main__":
    main()
