#!/usr/bin/env python3
"""Languages (bench/README.md, "Every language"): Whisper base streaming against its own batch
floor, per language, the language found, and lanes.

Speech: festival's voices (Italian, Czech, Catalan, Finnish, Russian; the Debian packages
festvox-italp16k, festvox-czech-ph, festvox-ca-ona-hts, festvox-suopuhe-lj, festvox-ru, which
`scripts/bootstrap.sh bench` installs) read the sentences below, each language's as one reading with a second
of silence before each sentence and after the last; English is LibriVox's five sentences
(pocketsphinx-testdata). A `steno serve` (defaults: tiny.en and base) hears each reading at real
time from `steno send` (Opus):

- `--language auto`, and the language given: WER of the finals against the text, beside base's batch floor (faster-
  whisper on the same decoded audio, whole reading, beam 5, the language given, earlier text as
  prompt); and the language of each final of 2 s or more against the one spoken;
- lanes (sent as fast as the server takes them, as translation is): `--languages L,it` (or
  `L,cs`) must hear every utterance (accepted: a final, no
  low_confidence), and lanes of two other languages must refuse it (no final, a low_confidence
  error);
- `--translate en`: how many finals (of 2 s or more) are English and name the language spoken.

    .venv/bin/python bench/languages.py [--steno .build/release/steno] [--languages it,cs,ca,fi,ru,en]
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from steno_serve import ROOT, serve  # noqa: E402
from worker_client import errors, librivox, read_wav  # noqa: E402

RATE = 16000
# language: (festival voice, the text's encoding, sentences)
SPEECH = {
    "it": ("lp_diphone", "latin-1", [
        "Buongiorno a tutti e benvenuti alla riunione di oggi.",
        "Parliamo del tempo e della città di Roma.",
        "Domani andiamo al mare con i nostri amici.",
        "Il treno per Milano parte alle nove di sera.",
        "Questa settimana la biblioteca resta chiusa il lunedì.",
    ]),
    "cs": ("czech_ph", "iso-8859-2", [
        "Dobrý den a vítejte na dnešní schůzce.",
        "Dnes budeme mluvit o počasí v Praze.",
        "Zítra pojedeme vlakem do Brna.",
        "Knihovna je tento týden v pondělí zavřená.",
        "Večer budeme doma a uvaříme večeři.",
    ]),
    "ca": ("upc_ca_ona_hts", "latin-1", [
        "Bon dia a tothom i benvinguts a la reunió d'avui.",
        "Avui parlarem del temps a Barcelona.",
        "Demà anirem a la platja amb els nostres amics.",
        "El tren cap a Girona surt a les nou del vespre.",
        "Aquesta setmana la biblioteca tanca el dilluns.",
    ]),
    "fi": ("suo_fi_lj_diphone", "latin-1", [
        "Hyvää huomenta kaikille ja tervetuloa kokoukseen.",
        "Tänään puhumme Helsingin säästä.",
        "Huomenna menemme rannalle ystävien kanssa.",
        "Juna Tampereelle lähtee yhdeksältä illalla.",
        "Kirjasto on tällä viikolla kiinni maanantaina.",
    ]),
    "ru": ("msu_ru_nsh_clunits", "utf-8", [
        "Добрый день и добро пожаловать на сегодняшнюю встречу.",
        "Сегодня мы поговорим о погоде в Москве.",
        "Завтра мы поедем на море с друзьями.",
        "Поезд в Петербург уходит в девять вечера.",
        "На этой неделе библиотека закрыта в понедельник.",
    ]),
}


def words(text):
    return re.findall(r"[\w']+", text.lower())


def reading(language, folder):
    """(path of the reading, [(start, end, reference words)]) for `language`."""
    pieces = []
    if language == "en":
        for _, samples, ref in librivox():
            pieces.append((np.asarray(samples, dtype=np.float32), ref))
    else:
        voice, encoding, sentences = SPEECH[language]
        for index, sentence in enumerate(sentences):
            text, wav = os.path.join(folder, f"{language}{index}.txt"), os.path.join(folder, f"{language}{index}.wav")
            with open(text, "wb") as f:
                f.write(sentence.encode(encoding))
            subprocess.run(["text2wave", "-F", str(RATE), "-eval", f"(voice_{voice})", "-o", wav, text],
                           check=True, capture_output=True)
            pieces.append((np.asarray(read_wav(wav), dtype=np.float32), words(sentence)))
    silence = np.zeros(RATE, dtype=np.float32)
    audio, spans, at = [], [], 0.0
    for samples, ref in pieces:
        audio += [silence, samples]
        at += 1.0
        spans.append((at, at + len(samples) / RATE, ref))
        at += len(samples) / RATE
    audio.append(silence)
    samples = np.concatenate(audio)
    path = os.path.join(folder, f"reading-{language}.wav")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(RATE)
        w.writeframes((np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes())
    return path, spans


def send(args, port, path, *extra):
    out = subprocess.run([args.steno, "send", path, "--server", f"ws://127.0.0.1:{port}", "--format", "jsonl", *extra],
                         capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def decoded(path, folder):
    """The audio the server hears of `path` sent as Opus (steno-bench opus)."""
    out = os.path.join(folder, "opus-" + os.path.basename(path))
    subprocess.run([os.path.join(ROOT, ".build/release/steno-bench"), "opus", path, out], check=True,
                   stdout=subprocess.DEVNULL)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steno", default=os.path.join(ROOT, ".build/release/steno"))
    parser.add_argument("--languages", default="it,cs,ca,fi,ru,en")
    args = parser.parse_args()
    from faster_whisper import WhisperModel
    base = WhisperModel(os.path.join(ROOT, ".venv/models/whisper-base"), device="cpu", compute_type="int8")
    languages = args.languages.split(",")
    server, port = serve(args.steno)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as folder:
            for language in languages:
                path, spans = reading(language, folder)
                reference = [w for _, _, ref in spans for w in ref]
                # Streaming, language found.
                events = send(args, port, path, "--language", "auto")
                finals = [e for e in events if e["type"] == "final"]
                heard = [w for f in finals for w in words(f["text"])]
                long = [f for f in finals if f["end"] - f["start"] >= 2]
                found = sum(f.get("language") == language for f in long)
                # Streaming, the language given (the last final's audio heard before each utterance).
                given = [w for e in send(args, port, path, "--language", language) if e["type"] == "final"
                         for w in words(e["text"])]
                # The floor: base on the same decoded audio, whole.
                started = time.process_time()
                segments, _ = base.transcribe(read_wav(decoded(path, folder)), language=language, beam_size=5,
                                              condition_on_previous_text=True)
                floor_words = [w for s in segments for w in words(s.text)]
                floor_cpu = time.process_time() - started
                # Lanes: its own (with another) accepted; two others refused.
                others = [x for x in ("it", "cs", "ru", "en") if x != language][:2]
                own = send(args, port, path, "--languages", f"{language},{others[0]}", "--fast")
                foreign = send(args, port, path, "--languages", ",".join(others), "--fast")
                accepted = sum(e["type"] == "final" for e in own)
                accept_refused = sum(e.get("code") == "low_confidence" for e in own)
                refused = sum(e.get("code") == "low_confidence" for e in foreign)
                slipped = sum(e["type"] == "final" for e in foreign)
                # Translation.
                translated = [e for e in send(args, port, path, "--translate", "en", "--fast") if e["type"] == "final"]
                named = sum(f.get("language") == language for f in translated if f["end"] - f["start"] >= 2)
                rows.append((language, len(reference), errors(reference, heard) / len(reference), errors(reference, given) / len(reference),
                             errors(reference, floor_words) / len(reference), found, len(long),
                             accepted, accept_refused, refused, slipped, named,
                             sum(1 for f in translated if f["end"] - f["start"] >= 2),
                             " ".join(f["text"] for f in translated)[:90]))
                print(f"{language}: done", file=sys.stderr)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print("| language | words | streaming WER (auto) | (language given) | base batch floor | language found (finals ≥ 2 s) "
          "| own lanes: finals / refused | other lanes: refused / finals | translated: language named |")
    print("|---|---|---|---|---|---|---|---|---|")
    for (language, n, wer, wer_given, floor, found, long, accepted, accept_refused, refused, slipped, named, translated_long,
         _) in rows:
        print(f"| {language} | {n} | {100 * wer:.1f} % | {100 * wer_given:.1f} % | {100 * floor:.1f} % | {found}/{long} "
              f"| {accepted} / {accept_refused} "
              f"| {refused} / {slipped} | {named}/{translated_long} |")
    print()
    for row in rows:
        print(f"{row[0]} translated: {row[-1]}")


if __name__ == "__main__":
    main()
