"""What a request to Steno's Whisper worker asks for, read from its JSON options
(scripts/whisper_worker.py documents them; scripts/whisper_recognizer.py hears them): the task,
a final's context and original, its least window, whether it is a volatile, its readings.
"""


def task_of(options):
    """What a request asks for: "transcribe" (the default), or "translate" into English."""
    return options.get("task") or "transcribe"


def context_of(options):
    """Samples of earlier speech at the start of a request's audio, heard before its own for
    the acoustic context: only for a final transcribed with word times and no other readings
    (they would hold the context's words); 0 otherwise. A language to be found is found in
    the request's own audio (`find_languages`)."""
    n = int(options.get("context", 0))
    if n <= 0 or is_volatile(options) or not options.get("words") or wanted_alternatives(options) > 0 \
            or task_of(options) != "transcribe":
        return 0
    return n


def wants_original(options):
    """A translated final that asks for its original: the same audio transcribed too."""
    return options.get("original") is True and task_of(options) == "translate" and not is_volatile(options)


def as_original(options):
    """The request that transcribes what `options` translates (its own language, as it was told or finds it)."""
    return {k: v for k, v in options.items() if k not in ("original", "task", "alternatives")}


def with_unsure_prompt(options):
    """A final heard again with its "unsurePrompt" as its prompt (and not again after that)."""
    again = {k: v for k, v in options.items() if k not in ("prompt", "unsurePrompt")}
    if options.get("unsurePrompt"):
        again["prompt"] = options["unsurePrompt"]
    return again


def without_context(options):
    return {k: v for k, v in options.items() if k != "context"}


def least_window(options, default):
    """The least encoder frames a request is heard in: its "minWindow" if it gives one (at
    least 100), else the worker's --min-window."""
    asked = options.get("minWindow")
    return default if asked is None else max(100, int(asked))


def is_volatile(options):
    """A volatile result, not a final: as "volatile" says, else a priority of 0 or less."""
    if "volatile" in options:
        return bool(options["volatile"])
    return int(options.get("priority", 0)) <= 0


def wanted_alternatives(options):
    """How many readings a request wants in all (its text among them), 0-10."""
    return max(0, min(10, int(options.get("alternatives", 0))))
