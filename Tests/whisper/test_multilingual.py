"""The Whisper worker with the multilingual base model that scripts/bootstrap.sh assembles in
.venv/models/whisper-base: a request's candidate languages and their scores ("lanes"), and
translation into English. One worker (one loaded model) serves the whole module.

The Italian and Czech clips are spoken at test time by festival's voices (festvox-italp16k,
festvox-czech-ph: bootstrap's test packages), at 16 kHz (`text2wave -F 16000`: the same
samples on every run); the English one is a LibriVox sentence of pocketsphinx-testdata. (Not
beckett.wav: base, unlike tiny.en, loops on its "fail better" in the worker's 12 s window, so
each final of it is heard again in the 30 s one, which takes twice as long.)"""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from worker_client import ROOT, Worker, errors, librivox, normalized, read_wav

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from whisper_languages import best_candidate, keep_settled, language_scores  # noqa: E402

RATE = 16000
ENGLISH = "he was not an ill disposed young man".split()  # librivox()[1]
BASE = os.path.join(ROOT, ".venv", "models", "whisper-base")

# (festival's voice, its text's encoding, the text).
SPEECH = {
    "it": ("lp_diphone", "latin-1", "Buongiorno a tutti. Oggi parliamo del tempo e della città di Roma."),
    "cs": ("czech_ph", "iso-8859-2", "Dobrý den. Dnes budeme mluvit o počasí v Praze."),
}


@pytest.fixture(scope="module")
def base():
    assert os.path.isfile(os.path.join(BASE, "model.bin")), f"no {BASE}: run scripts/bootstrap.sh test"
    w = Worker("--model", BASE)
    yield w
    w.close()


@pytest.fixture(scope="module")
def speech(tmp_path_factory):
    """{language: samples} of SPEECH, spoken by festival."""
    assert shutil.which("text2wave"), "festival is missing: run scripts/bootstrap.sh test"
    folder = tmp_path_factory.mktemp("speech")
    out = {}
    for language, (voice, encoding, text) in SPEECH.items():
        source, wav = folder / f"{language}.txt", folder / f"{language}.wav"
        source.write_bytes(text.encode(encoding))
        run = subprocess.run(["text2wave", "-F", str(RATE), "-eval", f"(voice_{voice})", "-o", str(wav), str(source)],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode == 0 and wav.exists(), \
            f"festival's {voice} is missing (run scripts/bootstrap.sh test): {run.stderr}"
        out[language] = read_wav(str(wav))
    _, out["en"], _ = librivox()[1]
    return out


def test_base_is_multilingual_and_names_its_99_languages(base):
    assert base.hello["path"] == BASE and base.hello["multilingual"] is True
    languages = base.hello["languages"]
    assert len(languages) == 99 and len(set(languages)) == 99
    assert languages[0] == "en" and {"it", "cs", "ru", "zh", "ja", "ca", "fi"} <= set(languages)


def test_candidates_are_scored_as_spelt_with_whisper_s_names():
    languages = ["en", "de", "no", "he", "zh"]
    heard = {"en": 0.1, "de": 0.2, "no": 0.6, "he": 0.05, "zh": 0.05}
    scores = language_scores(["nb-NO", "no", "iw", "de-AT", "fr", "cmn-Hans"], heard, languages)
    assert scores == {"nb-NO": 0.6, "no": 0.6, "iw": 0.05, "de-AT": 0.2, "fr": None, "cmn-Hans": 0.05}
    assert best_candidate(["de-AT", "nb-NO", "fr"], heard, languages) == ("no", 0.6)
    assert best_candidate(["he", "zh"], heard, languages) == ("he", 0.05)  # the first named of equals
    assert best_candidate(["fr"], heard, languages) is None
    # An English-only model cannot tell: no scores.
    assert language_scores(["en", "de"], None, ["en"]) == {"en": None, "de": None}


def test_a_settled_language_stands_unless_another_sounds_clearly_likelier():
    languages = ["en", "cs", "la", "it", "no"]
    # A Czech session's sentence that Whisper finds a little more Latin than Czech stays Czech.
    heard = {"cs": 0.35, "la": 0.45, "en": 0.05}
    assert keep_settled(("la", 0.45), "cs-CZ", heard, languages) == ("cs", 0.35)
    # English after Italian is English; so is speech heard in the settled language anyway.
    assert keep_settled(("en", 0.93), "it", {"en": 0.93, "it": 0.02}, languages) == ("en", 0.93)
    assert keep_settled(("cs", 0.9), "cs", heard, languages) == ("cs", 0.9)
    # Spelt as Whisper spells it; a language the model lacks (or none) leaves the choice alone.
    assert keep_settled(("en", 0.5), "nb", {"en": 0.5, "no": 0.2}, languages) == ("no", 0.2)
    assert keep_settled(("en", 0.5), "x-klingon", heard, languages) == ("en", 0.5)
    assert keep_settled(("en", 0.5), None, heard, languages) == ("en", 0.5)


def test_a_request_is_heard_in_its_sessions_settled_language_unless_another_is_clear(base, speech):
    # The Italian clip's first second ("Buongiorno a tu…") sounds about as Spanish as Italian
    # (0.38 and 0.37 here): an Italian session hears it in Italian, alone or among lanes.
    opening = speech["it"][:RATE]
    scores = base.transcribe(opening, candidates=["it", "es"])["languageScores"]
    assert scores["es"] < 5 * scores["it"], scores
    for lanes in (None, ["es", "it"]):
        heard = base.transcribe(opening, settled="it", candidates=lanes)
        assert heard["language"] == "it" and abs(heard["languageProbability"] - scores["it"]) < 0.01, heard
    # A clear change of language is heard: English speech of an Italian session, the whole
    # Italian clip of a Spanish one.
    english = base.transcribe(speech["en"], settled="it", words=True, beam=5, priority=1)
    assert english["language"] == "en" and english["languageProbability"] > 0.5, english
    assert errors(ENGLISH, normalized(english["text"])) <= 2, english
    assert base.transcribe(speech["it"], settled="es-ES")["language"] == "it"


def test_candidates_are_scored_as_spelt_and_the_likeliest_is_heard(base, speech):
    candidates = ["ru", "en-GB", "it-IT", "x-klingon", "cs"]
    result = base.transcribe(speech["it"], candidates=candidates, words=True, beam=5, priority=1)
    scores = result["languageScores"]
    assert list(scores) == candidates, scores
    assert scores["x-klingon"] is None  # no such language in the model
    assert scores["it-IT"] > 0.9 and all(scores[c] < 0.05 for c in ("ru", "en-GB", "cs")), scores
    assert result["language"] == "it" and result["languageProbability"] == scores["it-IT"]
    words = normalized(result["text"].replace("à", "a"))
    assert {"tutti", "oggi", "parliamo", "tempo", "roma"} <= set(words), result
    # Whisper's scores are the same whatever the candidates: the Czech clip, scored alone.
    czech = base.transcribe(speech["cs"], candidates=["cs-CZ"])
    assert czech["languageScores"]["cs-CZ"] > 0.5 and czech["language"] == "cs", czech
    assert "languageScores" not in base.transcribe(speech["cs"])


def test_the_sessions_language_stands_and_its_candidates_are_still_scored(base, speech):
    result = base.transcribe(speech["en"], language="en", candidates=["it", "cs"])
    assert result["language"] == "en" and "languageProbability" not in result
    assert errors(ENGLISH, normalized(result["text"])) <= 2, result
    # English speech matches none of them: the server's lane would reject it.
    assert all(p < 0.1 for p in result["languageScores"].values()), result
    # Without a language, it is heard in the likeliest candidate even so (the server decides).
    told = base.transcribe(speech["en"], candidates=["it", "cs"])
    assert told["language"] in ("it", "cs") and told["languageProbability"] < 0.1, told
    # Candidates the model lacks leave the language to Whisper's detection.
    free = base.transcribe(speech["en"], candidates=["x-klingon"])
    assert free["language"] == "en" and free["languageProbability"] > 0.5, free
    assert free["languageScores"] == {"x-klingon": None}


def test_translate_writes_english_and_says_the_language_spoken(base, speech):
    heard = base.transcribe(speech["it"], beam=5, priority=1)
    assert "task" not in heard and "Roma" in heard["text"], heard
    result = base.transcribe(speech["it"], task="translate", words=True, beam=5, priority=1)
    assert result["task"] == "translate" and result["language"] == "it", result
    words = normalized(result["text"])
    assert {"today", "rome"} <= set(words) and not {"oggi", "roma", "tutti"} & set(words), result
    assert [w[0] for w in result["words"]] == result["text"].split(), result
    assert all(0 <= w[1] <= w[2] <= len(speech["it"]) / RATE + 0.05 for w in result["words"]), result
    # Czech, with its language given.
    czech = base.transcribe(speech["cs"], task="translate", language="cs-CZ", beam=5, priority=1)
    assert czech["language"] == "cs" and normalized(czech["text"])[:2] == ["good", "day"], czech


def test_a_translation_asked_with_its_original_carries_the_transcription(base, speech):
    # Steno's channels carry a translated session's original beside its English: each final
    # asks for both, heard in one batch.
    transcribed = base.transcribe(speech["it"], words=True, beam=5, priority=1)
    result = base.transcribe(speech["it"], task="translate", original=True, words=True, beam=5, priority=1)
    assert result["task"] == "translate" and {"today", "rome"} <= set(normalized(result["text"])), result
    original = result["original"]
    assert original["language"] == "it" and original["text"] == transcribed["text"], result
    assert [w[0] for w in original["words"]] == original["text"].split(), result
    assert all(0 <= w[1] <= w[2] <= len(speech["it"]) / RATE + 0.05 for w in original["words"]), result
    # Only a translated final has one.
    assert "original" not in base.transcribe(speech["it"], original=True, beam=5, priority=1)
    assert "original" not in base.transcribe(speech["it"], task="translate", original=True, volatile=True)


def test_translating_english_is_transcribing_it(base, speech):
    transcribed = base.transcribe(speech["en"], beam=5, priority=1)
    translated = base.transcribe(speech["en"], task="translate", beam=5, priority=1)
    assert translated["text"] == transcribed["text"] and translated["language"] == "en"
    assert errors(ENGLISH, normalized(translated["text"])) <= 2, translated


def test_a_batch_of_both_tasks_is_aligned_per_task(base, speech):
    # The same clip transcribed and translated in one batch (they queue behind a slower request,
    # so the worker takes them together): each request's text and words as alone.
    alone = [base.transcribe(speech["it"], words=True, language="it"),
             base.transcribe(speech["it"], words=True, language="it", task="translate")]
    blocker = base.send(np.concatenate([speech["cs"]] * 3), beam=5, alternatives=5)
    ids = [base.send(speech["it"], words=True, language="it"),
           base.send(speech["it"], words=True, language="it", task="translate")]
    got = {}
    for _ in ids + [blocker]:
        kind, ident, body = base.read()
        assert kind == 2, body
        got[ident] = body
    for a, i in zip(alone, ids):
        assert errors(normalized(a["text"]), normalized(got[i]["text"])) <= 1, (a, got[i])
        assert [w[0] for w in got[i]["words"]] == got[i]["text"].split()
    assert got[ids[1]]["task"] == "translate" and "task" not in got[ids[0]]


def test_a_bad_task_or_candidates_is_refused(base, speech):
    for options, message in (({"task": "summarize"}, "task"), ({"candidates": "it"}, "candidates"),
                             ({"candidates": ["it", 7]}, "candidates"), ({"candidates": ["en"] * 101}, "more than"),
                             ({"settled": 3}, "settled")):
        ident = base.send(np.zeros(RATE), **options)
        kind, got, body = base.read()
        assert (kind, got) == (3, ident) and message in body["message"], (options, body)
    # Null is as if absent.
    assert base.transcribe(speech["en"], task=None, candidates=None)["language"] == "en"


def test_an_english_model_scores_no_candidates(speech):
    tiny = Worker()  # tiny.en, the default model
    try:
        result = tiny.transcribe(speech["en"], candidates=["en", "it"], task="translate")
        assert result["languageScores"] == {"en": None, "it": None} and result["language"] == "en"
        assert errors(ENGLISH, normalized(result["text"])) <= 2, result
    finally:
        tiny.close()


def pause_in(samples):
    """The sample in the middle of the longest quiet stretch (20 ms frames) of the middle 20-80 %."""
    frames = len(samples) // 320
    level = [float(np.sqrt(np.mean(np.square(samples[i * 320:(i + 1) * 320])))) for i in range(frames)]
    quiet = [v < 0.01 for v in level]
    best, run, start = (0, 0), 0, 0
    for i in range(int(frames * 0.2), int(frames * 0.8)):
        if quiet[i]:
            if run == 0:
                start = i
            run += 1
            if run > best[1]:
                best = (start, run)
        else:
            run = 0
    assert best[1] >= 5, "no pause between the sentences"
    return (best[0] + best[1] // 2) * 320


def test_a_final_heard_after_the_speech_before_it_is_its_own_words_timed_from_its_start(base, speech):
    # Steno's finals in a language the session names carry the cut before them as "context":
    # heard together, the result is only the later sentence's words, timed from its own start.
    samples = np.asarray(speech["it"], dtype=np.float32)
    split = pause_in(samples)
    alone = base.transcribe(samples[split:], words=True, beam=5, priority=2, language="it")
    heard = base.transcribe(samples, words=True, beam=5, priority=2, language="it", context=split)
    later = normalized("Oggi parliamo del tempo e della città di Roma.")
    assert "tutti" not in normalized(heard["text"]), heard
    assert errors(later, normalized(heard["text"])) <= errors(later, normalized(alone["text"])) + 1, (heard, alone)
    assert heard["contextSeconds"] == round(split / RATE, 3)
    own = (len(samples) - split) / RATE
    assert heard["words"] and all(0 <= w[1] <= w[2] <= own + 0.05 for w in heard["words"]), heard["words"]
    # Where nothing of it is heard after the context (here its own audio is silence), it is heard alone.
    quiet = base.transcribe(np.concatenate([samples, np.zeros(RATE, dtype=np.float32)]), words=True, beam=5,
                            priority=2, language="it", context=len(samples))
    assert quiet["text"] == "" and "contextSeconds" not in quiet, quiet
    # A context that is not one (negative) is no context: the whole audio is the request's.
    whole = base.transcribe(samples, words=True, beam=5, priority=2, language="it", context=-5)
    assert "tutti" in normalized(whole["text"]) and "contextSeconds" not in whole, whole
    # A volatile, a request asking for other readings or a translation is heard without it.
    for options in ({"priority": 1, "volatile": True}, {"priority": 2, "language": "it", "alternatives": 3},
                    {"priority": 2, "task": "translate"}):
        r = base.transcribe(samples, words=True, context=split, **options)
        assert "tutti" not in normalized(r["text"]) and "contextSeconds" not in r, (options, r)


def test_a_language_to_be_found_after_earlier_speech_is_found_in_its_own_audio(base, speech):
    # Without a language (auto, lanes), the earlier speech (English here) does not decide it:
    # the language is found, or chosen among the candidates, in the request's own audio.
    samples = np.asarray(speech["it"], dtype=np.float32)
    split = pause_in(samples)
    english = np.asarray(speech["en"], dtype=np.float32)
    mixed = np.concatenate([english, samples[split:]])
    later = normalized("Oggi parliamo del tempo e della città di Roma.")
    alone = base.transcribe(samples[split:], words=True, beam=5, priority=2)
    found = base.transcribe(mixed, words=True, beam=5, priority=2, context=len(english))
    assert found["language"] == "it" and found["languageProbability"] > 0.5, found
    assert errors(later, normalized(found["text"])) <= errors(later, normalized(alone["text"])) + 1, (found, alone)
    own = (len(mixed) - len(english)) / RATE
    assert found["words"] and all(0 <= w[1] <= w[2] <= own + 0.05 for w in found["words"]), found["words"]
    lanes = base.transcribe(mixed, words=True, beam=5, priority=2, context=len(english), candidates=["en", "it"])
    assert lanes["language"] == "it" and lanes["languageScores"]["it"] > 0.5 > lanes["languageScores"]["en"], lanes
