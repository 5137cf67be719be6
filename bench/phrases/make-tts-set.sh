#!/usr/bin/env bash
# Makes the synthetic half of the phrase benchmark's speech (bench/README.md, "Phrases"):
# each line of sentences.txt spoken by festival's kal voice (Debian: festival,
# festvox-kallpc16k), 16 kHz mono 16-bit, as tts/NAME.wav, and tts/transcription with the
# references (lowercase words, in the format of pocketsphinx-testdata's). The WAVs are kept
# in the repository, so the benchmark does not need festival's voice.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p tts
: > tts/transcription
while IFS=$'\t' read -r name text; do
    echo "$text" | text2wave -F 16000 -o "tts/$name.wav"
    words=$(echo "$text" | tr 'A-Z' 'a-z' | tr -d '.,;:!?')
    echo "<s> $words </s> ($name)" >> tts/transcription
done < sentences.txt
