"""Languages for Steno's Whisper worker (scripts/whisper_recognizer.py uses it): a session's
BCP 47 tags as Whisper's codes, the languages a model has, and Whisper's own probabilities of
a request's candidate languages ("lanes": the server keeps the best configured language, or
rejects audio that sounds like none of them).
"""

# BCP 47 primary subtags that Whisper's language tokens spell otherwise (deprecated ISO 639
# codes, and languages Whisper names by a near one).
WHISPER_SPELLING = {"jv": "jw", "iw": "he", "in": "id", "ji": "yi", "nb": "no", "fil": "tl", "cmn": "zh"}

# The most candidates a request may name (Whisper has 99 or 100 languages).
MAX_CANDIDATES = 100

# How many times likelier than a session's settled language another must sound to be heard
# instead (`keep_settled`). Whisper's slips are close calls (a Czech sentence heard as Latin, 0.57
# against 0.20 for Czech cut one way, Latin ahead cut another), a real change of language is not
# (English after Italian: 0.9 and more against a few hundredths).
SWITCH_RATIO = 5.0


def whisper_language(tag, languages):
    """Whisper's code for a session's BCP 47 tag ("de-DE" -> "de", "zh-Hant-TW" -> "zh"), or
    None when there is no tag or the model has no such language."""
    if not isinstance(tag, str) or not tag:
        return None
    primary = tag.replace("_", "-").split("-")[0].lower()
    code = WHISPER_SPELLING.get(primary, primary)
    return code if code in languages else None


def model_languages(model):
    """Whisper's codes of the languages a faster-whisper model has, in its order ("en" first):
    those whose token is among its first `num_languages` after the start of transcript; ["en"]
    for an English-only model."""
    if not model.model.is_multilingual:
        return ["en"]
    from faster_whisper.tokenizer import _LANGUAGE_CODES
    vocabulary = model.hf_tokenizer
    first = vocabulary.token_to_id("<|startoftranscript|>") + 1
    count = model.model.num_languages
    ids = {code: vocabulary.token_to_id(f"<|{code}|>") for code in _LANGUAGE_CODES}
    return sorted((c for c, i in ids.items() if i is not None and first <= i < first + count), key=ids.get)


def check_candidates(value):
    """A request's "candidates", or ValueError: a list of at most MAX_CANDIDATES strings."""
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise ValueError("\"candidates\" is not a list of strings")
    if len(value) > MAX_CANDIDATES:
        raise ValueError(f"\"candidates\" names more than {MAX_CANDIDATES} languages")
    return value


def detected_probabilities(detected):
    """One request's detect_language answer ([("<|ru|>", p), ...]) as {code: p}."""
    return {token.strip("<|>"): float(p) for token, p in detected}


def language_scores(candidates, heard, languages):
    """{candidate, as the request spelt it: Whisper's probability of its language, rounded to 4
    places}, from `heard` ({code: p} of the whole audio, or None when the model cannot tell
    languages apart: an English-only one); None for a candidate the model has no language for
    (and for every one when `heard` is None). Two tags of one language ("nb", "no") score alike."""
    scores = {}
    for tag in candidates:
        code = whisper_language(tag, languages)
        scores[tag] = None if heard is None or code is None else round(heard.get(code, 0.0), 4)
    return scores


def keep_settled(best, settled, heard, languages):
    """`best` ((code, probability) of the language Whisper would hear the request in), or the
    session's settled language (a BCP 47 tag; its code and probability) unless `best` sounds at
    least SWITCH_RATIO times likelier: a session that keeps speaking one language is heard in it,
    and changes language on clear evidence only."""
    code = whisper_language(settled, languages)
    if code is None or heard is None or best[0] == code:
        return best
    probability = heard.get(code, 0.0)
    return best if best[1] >= SWITCH_RATIO * probability else (code, probability)


def best_candidate(candidates, heard, languages):
    """(code, probability) of the candidate Whisper finds likeliest, the first named of equals;
    None when the model has none of them."""
    best = None
    for tag in candidates:
        code = whisper_language(tag, languages)
        if code is not None and (best is None or heard.get(code, 0.0) > best[1]):
            best = (code, heard.get(code, 0.0))
    return best
