#!/usr/bin/env python3
"""Audio context (bench/README.md, "Every language"): what hearing each utterance after the audio
of the one before would gain over hearing it alone with the text before as prompt, as the stream
does now. An experiment on the worker alone, not what `steno serve` does.

Each reading of bench/languages.py (festival's voices, LibriVox for English), sentence by
sentence: a sentence is the utterance the stream would cut (0.5 s before it, 0.2 s after), heard
by the Whisper worker (beam 5, the language given)
- alone, with the earlier finals' last 200 characters as prompt (the stream's rule);
- after up to `--context` seconds of the audio before it (the earlier sentences and their
  pauses), with the prompt of the finals before that audio; the words that start at or after
  the utterance are kept, and when they are fewer than 0.7 of what it heard alone (Whisper can
  stop at the pause between the two), what it heard alone is.
WER per language against the sentences' text (the batch floor is bench/languages.py's), and the
worker's CPU seconds for the finals each way.

    .venv/bin/python bench/audio_context.py [--model base|tiny.en] [--languages it,cs,ca,fi,ru,en] [--context 6]
"""

import argparse
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from languages import SPEECH, reading, words  # noqa: E402
from steno_serve import ROOT  # noqa: E402
from worker_client import Worker, errors, librivox, read_wav  # noqa: E402

RATE = 16000


def sentences(language, folder):
    """[(samples, reference words)] of `language`'s reading, sentence by sentence."""
    if language == "en":
        return [(np.asarray(s, dtype=np.float32), ref) for _, s, ref in librivox()]
    reading(language, folder)  # synthesizes each sentence into `folder`
    return [(np.asarray(read_wav(os.path.join(folder, f"{language}{i}.wav")), dtype=np.float32), words(text))
            for i, text in enumerate(SPEECH[language][2])]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="base", help="base (the multilingual model) or tiny.en")
    parser.add_argument("--languages", default="it,cs,ca,fi,ru,en")
    parser.add_argument("--context", type=float, default=6.0, help="seconds of earlier audio before each utterance")
    args = parser.parse_args()
    worker = Worker("--model", os.path.join(ROOT, ".venv/models/whisper-base")) if args.model == "base" else Worker()
    before, after = np.zeros(RATE // 2, dtype=np.float32), np.zeros(RATE // 5, dtype=np.float32)
    pause = np.zeros(RATE, dtype=np.float32)
    print(f"model {args.model}, context {args.context:g} s: WER per language (errors / words)")
    print(f"{'language':<10}{'alone + text prompt':>22}{'after the audio before':>26}{'fell back':>11}{'CPU s':>14}")
    with tempfile.TemporaryDirectory() as folder:
        for language in args.languages.split(","):
            options = {"words": True, "beam": 5, "priority": 2}
            if args.model == "base":
                options["language"] = language
            alone_errors = context_errors = total = fallbacks = 0
            alone_cpu = context_cpu = 0.0
            finals, earlier = [], np.zeros(0, dtype=np.float32)
            for samples, ref in sentences(language, folder):
                utterance = np.concatenate([before, samples, after])
                heard_alone = worker.transcribe(utterance, prompt=" ".join(finals)[-200:] or None, **options)
                alone, alone_cpu = heard_alone["text"], alone_cpu + heard_alone["seconds"]
                context = earlier[-int(args.context * RATE):]
                heard = worker.transcribe(np.concatenate([context, utterance]),
                                          prompt=" ".join(finals[:-1])[-200:] or None, **options)
                context_cpu += heard["seconds"]
                boundary = len(context) / RATE
                kept = " ".join(w[0] for w in heard["words"] if w[1] >= boundary)
                if len(words(kept)) < 0.7 * len(words(alone)):
                    kept = alone
                    fallbacks += 1
                alone_errors += errors(ref, words(alone))
                context_errors += errors(ref, words(kept))
                total += len(ref)
                finals.append(alone)
                earlier = np.concatenate([earlier, pause, samples])
            print(f"{language:<10}{f'{100 * alone_errors / total:.1f} % ({alone_errors}/{total})':>22}"
                  f"{f'{100 * context_errors / total:.1f} % ({context_errors}/{total})':>26}{fallbacks:>11}"
                  f"{f'{alone_cpu:.1f} → {context_cpu:.1f}':>14}", flush=True)


if __name__ == "__main__":
    main()
