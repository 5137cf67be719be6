"""The worker's batch rules (scripts/whisper_recognizer.py's `run`, `run_one_beam`,
`heard_again_if_unsure`) over scripted recognizers: which requests are heard again, how, and
which hearing stands. No model; test_worker.py has the real one."""

import os
import sys

import numpy as np

from worker_client import ROOT

sys.path.insert(0, os.path.join(ROOT, "scripts"))
from whisper_recognizer import Recognizer  # noqa: E402

RATE = 16000


class UnsureRecognizer(Recognizer):
    """`heard_again_if_unsure` over a scripted `recognize`: 4 s of audio heard as `told[prompt]`
    (text, log-probability, dropped). No model."""

    logprob_threshold = -1.0

    def __init__(self, told):
        self.told = told
        self.prompts = []

    def recognize(self, batch, fixed_window=None):
        out = []
        for options, _ in batch:
            self.prompts.append(options.get("prompt"))
            text, logprob, dropped = self.told[options.get("prompt")]
            out.append({"text": "" if dropped else text, "heard": text, "words": [] if dropped else text.split(),
                        "logprob": logprob, "dropped": dropped, "window": 3000, "seconds": 0.25})
        return out


def test_the_surer_of_a_final_and_its_hearing_without_earlier_finals_stands():
    four = np.zeros(4 * RATE)
    final = {"beam": 5, "priority": 2, "prompt": "Marianne. He was not", "unsurePrompt": "Marianne."}
    lost = UnsureRecognizer({"Marianne. He was not": ("be rather", -1.4, None),
                             "Marianne.": ("unless to be rather cold", -0.8, None)})
    [result] = lost.run([(final, four)])
    assert result["text"] == "unless to be rather cold" and result["seconds"] == 0.5
    assert lost.prompts == ["Marianne. He was not", "Marianne."]
    # Sure enough (as many words as seconds, or a better score), a volatile, or told nothing: heard once.
    for told, options in [({"Marianne. He was not": ("one two three four", -1.4, None)}, final),
                          ({"Marianne. He was not": ("be rather", -0.6, None)}, final),
                          ({"Marianne. He was not": ("be rather", -1.4, None)}, dict(final, volatile=True)),
                          ({"Marianne. He was not": ("be rather", -1.4, None)}, {"beam": 5, "prompt": "Marianne. He was not"})]:
        once = UnsureRecognizer(told)
        [result] = once.run([(options, four)])
        assert result["heard"] == told["Marianne. He was not"][0] and len(once.prompts) == 1, options
    # Dropped: heard once (over other talkers, heard again it makes words of theirs).
    dropped = UnsureRecognizer({"He was not": ("10. 10. 10.", -1.8, "low_confidence"), None: ("Do you hear?", -1.4, None)})
    [result] = dropped.run([({"beam": 5, "priority": 2, "prompt": "He was not", "unsurePrompt": None}, four)])
    assert result["text"] == "" and dropped.prompts == ["He was not"]
    # Heard again with no prompt at all; the first stands when the second is worse.
    none = UnsureRecognizer({"He was not": ("be rather", -1.2, None), None: ("at least to be", -0.9, None)})
    [result] = none.run([({"beam": 5, "priority": 2, "prompt": "He was not", "unsurePrompt": None}, four)])
    assert result["text"] == "at least to be" and none.prompts == ["He was not", None]
    worse = UnsureRecognizer({"He was not": ("be rather", -1.2, None), None: ("thank you", -1.3, None)})
    [result] = worse.run([({"beam": 5, "priority": 2, "prompt": "He was not", "unsurePrompt": None}, four)])
    assert result["text"] == "be rather" and result["seconds"] == 0.5


class ScriptedRecognizer(Recognizer):
    """The worker's batch logic (`run`, `run_one_beam`) over a scripted `recognize`: a request's
    text is `heard(window, seconds of audio)`, for the window it is heard in. No model."""

    def __init__(self, heard):
        self.heard = heard
        self.windows = []

    def recognize(self, batch, fixed_window=None):
        window = fixed_window or 1000
        self.windows.append((window, len(batch)))
        return [{"text": self.heard(window, len(samples) // RATE), "dropped": None, "window": window, "seconds": 0.25}
                for _, samples in batch]


def test_a_doubled_final_is_heard_again_in_the_full_window_and_what_it_hears_there_stands():
    scripted = ScriptedRecognizer(lambda window, _: "7 of clubs." if window == 3000 else "7 of clubs 7 of clubs")
    final = {"beam": 5, "priority": 1}
    [result] = scripted.run([(final, np.zeros(RATE))])
    assert scripted.windows == [(1000, 1), (3000, 1)]
    assert result["text"] == "7 of clubs." and result["window"] == 3000
    assert result["seconds"] == 0.5  # both hearings are the request's cost
    # A volatile said twice stands as it is: the next volatile, or the final, comes soon.
    scripted.windows = []
    [guess] = scripted.run([({"priority": 0}, np.zeros(RATE))])
    assert scripted.windows == [(1000, 1)] and guess["text"] == "7 of clubs 7 of clubs"
    # Of a batch, only the doubled final is heard again (the 2 s one here).
    mixed = ScriptedRecognizer(lambda window, seconds: "Ever tried." if seconds == 1 else
                               "Fail better." if window == 3000 else "No matter. No matter.")
    results = mixed.run([(final, np.zeros(RATE)), (final, np.zeros(2 * RATE))])
    assert [r["text"] for r in results] == ["Ever tried.", "Fail better."]
    assert mixed.windows == [(1000, 2), (3000, 1)]
