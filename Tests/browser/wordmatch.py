"""Word-level comparison of captions with the server's reference transcript.

The captions of a live session and `steno transcribe` of the same file need not be identical:
the browser's fake microphone resamples the file (16 kHz → 44.1 kHz device), the page loses a
few milliseconds of leading silence, Opus changes the samples a little, and the endpointer
may cut utterances at slightly different places, which changes the language model's context
near the cut. So the comparison is on bags of words, not on strings:

  * F1 of the multiset overlap of all words (how many words agree, counting repeats), and
  * for each reference final of three words or more, the share of its words that appear in
    the captions: a lost utterance (dropped audio, a missing final) fails this even when the
    overall F1 would still pass.

Measured here with pocketsphinx (batch) on audio captured through chromium's fake microphone,
against the original file: F1 0.81 to 0.94 over several runs of the Opus and the PCM path
(Opus encodings differ a little from run to run, and so do a word or two). The page tests
require 0.6 and half of every reference utterance; the steno-client tests, which send the
file's own samples at its own rate, require 0.8. Audio declared at the wrong rate, or a
lost utterance, scores far below either.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

_TOKEN = re.compile(r"[a-z0-9']+")
_FILLER = re.compile(r"<[^>]*>|\[[^\]]*\]|\(\d+\)")  # <sil>, [noise], alternates like (2)


def words(text: str) -> list[str]:
    return _TOKEN.findall(_FILLER.sub(" ", text.lower()))


@dataclass
class Match:
    f1: float
    recall: float
    precision: float
    per_final: list[tuple[str, float]]
    reference_words: int
    caption_words: int

    def describe(self) -> str:
        lines = [f"F1 {self.f1:.2f} (recall {self.recall:.2f}, precision {self.precision:.2f}; "
                 f"{self.reference_words} reference words, {self.caption_words} caption words)"]
        lines += [f"  {share:.2f}  {text}" for text, share in self.per_final]
        return "\n".join(lines)


def compare(reference_finals: list[str], captions: list[str]) -> Match:
    ref = Counter(w for f in reference_finals for w in words(f))
    hyp = Counter(w for c in captions for w in words(c))
    common = sum((ref & hyp).values())
    n_ref, n_hyp = sum(ref.values()), sum(hyp.values())
    recall = common / n_ref if n_ref else 0.0
    precision = common / n_hyp if n_hyp else 0.0
    f1 = 2 * recall * precision / (recall + precision) if common else 0.0
    per_final = []
    for final in reference_finals:
        fw = Counter(words(final))
        if sum(fw.values()) >= 3:
            per_final.append((final, sum((fw & hyp).values()) / sum(fw.values())))
    return Match(f1, recall, precision, per_final, n_ref, n_hyp)


def assert_similar(reference_finals: list[str], captions: list[str], min_f1: float, min_final_share: float = 0.5):
    match = compare(reference_finals, captions)
    report = f"{match.describe()}\ncaptions: {captions}\nreference: {reference_finals}"
    assert match.f1 >= min_f1, f"captions differ too much from the reference\n{report}"
    for text, share in match.per_final:
        assert share >= min_final_share, f"a reference utterance is missing from the captions: {text!r}\n{report}"
    return match
