"""A multilingual Whisper model through the worker: what its hello says, the language it finds or
is told. Whisper base, which scripts/bootstrap.sh installs, unless STENO_WHISPER_MULTILINGUAL_MODEL
names another CTranslate2 Whisper folder."""

import os

import pytest

from worker_client import ROOT, Worker, errors, librivox, normalized

MULTILINGUAL = os.environ.get("STENO_WHISPER_MULTILINGUAL_MODEL", os.path.join(ROOT, ".venv", "models", "whisper-base"))


@pytest.fixture(scope="module")
def multilingual():
    w = Worker("--model", MULTILINGUAL)
    yield w
    w.close()


def test_a_multilingual_model_says_so_and_names_its_languages(multilingual):
    assert multilingual.hello["multilingual"] is True
    languages = multilingual.hello["languages"]
    assert languages[0] == "en" and {"de", "fr", "zh", "ja"} <= set(languages) and len(languages) >= 99


def test_a_multilingual_model_detects_the_language_or_takes_the_sessions(multilingual):
    items = librivox()[:3]
    for _, samples, ref in items:
        detected = multilingual.transcribe(samples, words=True)
        assert detected["language"] == "en" and detected["languageProbability"] > 0.5, detected
        assert errors(ref, normalized(detected["text"])) <= len(ref) // 4
        assert detected["words"]
        told = multilingual.transcribe(samples, language="en-GB")
        assert told["language"] == "en" and "languageProbability" not in told
        german = multilingual.transcribe(samples, language="de-DE", words=True)
        assert german["language"] == "de" and "languageProbability" not in german
    # A batch of two languages is aligned per language: each request's words as alone, within a
    # word (CTranslate2 pads batched inputs, so it does not promise the same text: base heard
    # "ill-disposed" alone and "ill-sposed" batched). (They queue behind a slower request heard
    # in the same window, so the worker takes them together.)
    alone = [multilingual.transcribe(items[0][1], words=True, language="de"),
             multilingual.transcribe(items[1][1], words=True)]
    blocker = multilingual.send(items[2][1], beam=5, alternatives=5)
    ids = [multilingual.send(items[0][1], words=True, language="de"), multilingual.send(items[1][1], words=True)]
    got = {}
    for _ in ids + [blocker]:
        kind, ident, body = multilingual.read()
        assert kind == 2
        got[ident] = body
    for a, i in zip(alone, ids):
        assert errors(normalized(a["text"]), normalized(got[i]["text"])) <= 1, (a["text"], got[i]["text"])
        assert len(got[i]["words"]) >= len(a["words"]) - 1
