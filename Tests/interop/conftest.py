"""One `steno serve` for the module's tests, with its defaults (Whisper tiny.en, the worker and
all) but for the multilingual model, on a free loopback port, with a token: what a user of a
Deepgram or OpenAI client would point it at. Speech is LibriVox's, from pocketsphinx's test
data (a Debian package bootstrap installs)."""

import os
import re
import socket
import subprocess
import time
import urllib.request
import wave

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
STENO = os.environ.get("STENO_BIN", os.path.join(ROOT, ".build", "debug", "steno"))
TOKEN = "interop-secret"
LIBRIVOX = "/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-{}.wav"
# The sentences' words, as LibriVox's reader says them.
SENTENCES = {
    "0880": "he was not an ill disposed young man",
    "0930": "he might even have been made amiable himself",
}


class Server:
    def __init__(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"), f"steno-interop-{self.port}.log"), "w+")
        self.process = subprocess.Popen(
            [STENO, "serve", "--host", "127.0.0.1", "--port", str(self.port), "--token", TOKEN,
             "--whisper-multilingual", "none"],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while True:
            assert self.process.poll() is None, f"steno serve exited: {self.tail()}"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.time() < deadline, f"steno serve was not ready in 120 s: {self.tail()}"
            time.sleep(0.2)

    def tail(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-2000:]

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


@pytest.fixture(scope="session")
def server():
    assert os.access(STENO, os.X_OK), f"no steno executable at {STENO} (run swift build, or set STENO_BIN)"
    s = Server()
    yield s
    s.stop()


def speech(name):
    """(16-bit mono PCM bytes, sample rate) of a LibriVox sentence."""
    with wave.open(LIBRIVOX.format(name)) as w:
        assert w.getnchannels() == 1 and w.getsampwidth() == 2
        return w.readframes(w.getnframes()), w.getframerate()


def words(text):
    return re.findall(r"[a-z']+", text.lower().replace("-", " "))


def word_errors(reference, hypothesis):
    """Word-level edit distance."""
    r, h = reference, hypothesis
    d = list(range(len(h) + 1))
    for i in range(1, len(r) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(h) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (r[i - 1] != h[j - 1]))
    return d[len(h)]
