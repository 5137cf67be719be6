#!/usr/bin/env python3
"""Whisper worker benchmark: WER and CPU per audio second of scripts/whisper_worker.py on the
labelled sets, for several encoder windows and batch sizes, side by side in one run.

    .venv/bin/python bench/whisper.py
    .venv/bin/python bench/whisper.py --finals [--model DIR] [--rounds N]

The floor is the same model's faster-whisper batch transcription of each whole file
(`WhisperModel.transcribe`, 30 s window, beam 1), run in the same process.

--finals: the worker's CPU per final (beam 5, words) of each labelled file, one at a time, with
and without what a session may ask of it: alternatives (the beam's other hypotheses), and on a
multilingual model (--model) the language detected or given; the kinds in turn, round after
round, so the machine's noise falls on all of them."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from worker_client import Worker, cards, default_model, errors, floor, librivox, normalized  # noqa: E402


def main():
    sets = {"librivox": librivox(), "cards": cards()}
    rows = []
    # The floor: faster-whisper's own transcription of each whole file.
    from faster_whisper import WhisperModel
    model = WhisperModel(default_model(), device="cpu", compute_type="int8", local_files_only=True)
    for set_name, items in sets.items():
        wer, cpu = floor(model, [(samples, ref) for _, samples, ref in items])
        rows.append((set_name, "faster-whisper transcribe (floor)", "30 s", 1, wer, cpu))
    for window, args in [("30 s", ["--min-window", "3000"]), ("audio+2 s, >= 10 s", ["--min-window", "1000", "--margin", "200"]),
                         ("audio+1 s, >= 5 s", ["--min-window", "500", "--margin", "100"])]:
        for batch in (1, 4):
            for set_name, items in sets.items():
                worker = Worker("--batch", str(batch), *args)
                load = worker.cpu()
                if batch == 1:
                    results = [worker.transcribe(s, words=True) for _, s, _ in items]
                else:
                    for _, s, _ in items:
                        worker.send(s, words=True)
                    results = [worker.read()[2] for _ in items]
                spent = worker.cpu() - load
                worker.close()
                errs = sum(errors(ref, normalized(r["text"])) for (_, _, ref), r in zip(items, results))
                total = sum(len(ref) for _, _, ref in items)
                audio = sum(len(s) for _, s, _ in items) / 16000
                rows.append((set_name, "worker", window, batch, errs / total, spent / audio))
    print(f"{'set':9} {'what':34} {'window':20} {'batch':>5} {'WER':>6} {'CPU s/audio s':>13}")
    for set_name, what, window, batch, wer, cpu in rows:
        print(f"{set_name:9} {what:34} {window:20} {batch:5} {wer*100:5.1f}% {cpu:13.3f}")


def finals(model, rounds):
    items = librivox() + cards()
    worker = Worker(*(["--model", model] if model else []))
    kinds = {"final": {}, "final, 5 alternatives": {"alternatives": 5}}
    if worker.hello["multilingual"]:
        kinds = {"final, language detected": {}, "final, language given": {"language": "en-US"},
                 "final, detected, 5 alternatives": {"alternatives": 5}}
    spent = {k: 0.0 for k in kinds}
    texts = {k: [] for k in kinds}
    for _ in range(rounds):
        for kind, options in kinds.items():
            before = worker.cpu()
            texts[kind] = [worker.transcribe(s, words=True, beam=5, **options)["text"] for _, s, _ in items]
            spent[kind] += worker.cpu() - before
    worker.close()
    first = next(iter(kinds))
    print(f"{worker.hello['model']}: {len(items)} files x {rounds} rounds")
    print(f"{'what':34} {'CPU ms / final':>14} {'texts as ' + first:>24}")
    for kind in kinds:
        same = sum(a == b for a, b in zip(texts[kind], texts[first]))
        print(f"{kind:34} {1000 * spent[kind] / (rounds * len(items)):14.1f} {same:>17}/{len(items)}")


if __name__ == "__main__":
    if "--finals" in sys.argv:
        model = sys.argv[sys.argv.index("--model") + 1] if "--model" in sys.argv else None
        rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5
        finals(model, rounds)
    else:
        main()
