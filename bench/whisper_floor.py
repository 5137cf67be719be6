#!/usr/bin/env python3
"""Whisper's batch floor on the WAV files named (16 kHz mono 16-bit): faster-whisper's own
transcription of each whole file with the server's default model, as the floor of
bench/streaming.py and bench/whisper.py. Prints one JSON object: "rtf" (CPU s per audio s,
loading left out), "audio" (s), "loading" (CPU s to load the model). `steno-bench capacity
--engine whisper` takes its compute bound from it.

    .venv/bin/python bench/whisper_floor.py a.wav b.wav ..."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from worker_client import default_model, floor, read_wav  # noqa: E402


def main():
    items = [(read_wav(path), []) for path in sys.argv[1:]]
    if not items:
        sys.exit("whisper_floor.py: name the WAV files")
    started = time.process_time()
    from faster_whisper import WhisperModel
    model = WhisperModel(default_model(), device="cpu", compute_type="int8", local_files_only=True)
    loading = time.process_time() - started
    _, rtf = floor(model, items)
    print(json.dumps({"rtf": rtf, "audio": sum(len(s) for s, _ in items) / 16000, "loading": loading}))


if __name__ == "__main__":
    main()
