"""Fixtures for the browser tests: the real steno server, its reference transcript, and
Debian's chromium with a fake microphone that plays a WAV file.

Environment:
  STENO_BIN              path to the steno executable (default: .build/release/steno or
                         .build/debug/steno if built; otherwise the tests are skipped)
  STENO_SERVE_ARGS       extra arguments for `steno serve` (shell-quoted)
  STENO_TRANSCRIBE_ARGS  extra arguments for `steno transcribe` (shell-quoted)
  STENO_CHROMIUM         chromium executable (default /usr/bin/chromium)
  STENO_NODE             node executable for the Node tests (default: node on PATH); Node 18
                         or later (a Node without a WebSocket global gets Debian's node-ws)
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
WEB_ROOT = REPO / "web-client"
DATA = HERE / "data"
ARTIFACTS = REPO / "artifacts" / "browser"
SPEECH_WAV = DATA / "two-sentences-16k.wav"

# Generous limits that only guard against hangs; nothing asserts how long anything takes.
SERVER_START_TIMEOUT = 120
TRANSCRIBE_TIMEOUT = 300

LISTENING = re.compile(r"listening on http://127\.0\.0\.1:(\d+)")


def free_port() -> int:
    """A loopback port nobody listens on now (bound to 0 and closed again)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _steno_bin() -> Path | None:
    configured = os.environ.get("STENO_BIN")
    if configured:
        return Path(configured).resolve()
    for candidate in (REPO / ".build" / "release" / "steno", REPO / ".build" / "debug" / "steno"):
        if candidate.is_file():
            return candidate
    return None


@pytest.fixture(scope="session")
def steno_bin() -> Path:
    path = _steno_bin()
    if path is None:
        pytest.skip("no steno binary: set STENO_BIN (or build .build/debug/steno)")
    if not os.access(path, os.X_OK):
        pytest.fail(f"STENO_BIN is not an executable: {path}")
    return path


@pytest.fixture(scope="session")
def chromium_path(steno_bin) -> str:
    path = os.environ.get("STENO_CHROMIUM", "/usr/bin/chromium")
    if not Path(path).is_file():
        pytest.fail(f"chromium not found at {path}: apt-get install chromium (or set STENO_CHROMIUM)")
    return path


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


@dataclass
class Server:
    port: int
    process: subprocess.Popen
    log: Path
    out: object = None  # the log file, closed when the server stops

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}/v1/stream"

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (the server drains), then waits for it to exit; returns its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.out and not self.out.closed:
            self.out.close()
        return self.process.returncode


def start_server(steno_bin: Path, log: Path, args: list[str] = (), port: int = 0) -> Server:
    """`steno serve` on 127.0.0.1 (port 0: any free one), once it says it is listening."""
    command = [str(steno_bin), "serve", "--engine", "pocketsphinx", "--host", "127.0.0.1", "--port", str(port), "--web-root", str(WEB_ROOT)]
    command += shlex.split(os.environ.get("STENO_SERVE_ARGS", "")) + list(args)
    out = log.open("a")
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=out, text=True, bufsize=1)
    found = threading.Event()
    ports: list[int] = []

    def pump():  # keep reading stdout so the server never blocks on a full pipe
        for line in process.stdout:
            out.write(line)
            out.flush()
            match = LISTENING.search(line)
            if match and not ports:
                ports.append(int(match.group(1)))
                found.set()
        found.set()

    threading.Thread(target=pump, daemon=True).start()
    found.wait(SERVER_START_TIMEOUT)
    if not ports:
        process.kill()
        process.wait()
        out.close()
        pytest.fail("steno serve did not print 'listening on http://127.0.0.1:<port>' within "
                    f"{SERVER_START_TIMEOUT} s (exited: {process.returncode}). Note that stdout is a pipe here: "
                    "the server must flush after that line.\n" + log.read_text()[-4000:])
    return Server(ports[0], process, log, out)


@pytest.fixture
def server(steno_bin, artifacts, request):
    """A fresh server for each test, so no recognizer state carries over between tests."""
    log = artifacts / f"server-{request.node.name}.log"
    log.write_text("")
    running = start_server(steno_bin, log)
    yield running
    running.stop()


@pytest.fixture
def make_server(steno_bin, artifacts, request):
    """make_server(*args, port=0) → a server started with more options; all stop after the test."""
    servers: list[Server] = []
    log = artifacts / f"server-{request.node.name}.log"
    log.write_text("")

    def make(*args: str, port: int = 0) -> Server:
        running = start_server(steno_bin, log, list(args), port)
        servers.append(running)
        return running

    yield make
    for running in servers:
        running.stop()


# ---- the reference transcript ------------------------------------------------------------

REFERENCE_LINE = re.compile(r"^\s*\[([^\]]*)\]\s*(.*)$")


def parse_transcript(text: str) -> list[str]:
    """Lines of `steno transcribe --format text` ("[start → end] text") → one text per final."""
    finals = []
    for line in text.splitlines():
        if not line.strip():
            continue
        match = REFERENCE_LINE.match(line)
        finals.append((match.group(2) if match else line).strip())
    return [f for f in finals if f]


@pytest.fixture(scope="session")
def reference(steno_bin) -> list[str]:
    """What the server transcribes for the test file, one final per item."""
    args = [str(steno_bin), "transcribe", str(SPEECH_WAV), "--engine", "pocketsphinx", "--format", "text"]
    args += shlex.split(os.environ.get("STENO_TRANSCRIBE_ARGS", ""))
    result = subprocess.run(args, capture_output=True, text=True, timeout=TRANSCRIBE_TIMEOUT)
    assert result.returncode == 0, f"steno transcribe failed:\n{result.stderr[-4000:]}"
    finals = parse_transcript(result.stdout)
    assert finals, f"steno transcribe printed no finals:\n{result.stdout}"
    return finals


# ---- the browser --------------------------------------------------------------------------


@pytest.fixture(scope="session")
def playwright_instance():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture
def launch_browser(playwright_instance, chromium_path):
    """launch_browser(wav) → a headless chromium whose microphone plays `wav` once."""
    browsers = []

    def launch(wav: Path | None = None):
        args = ["--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream"]
        if wav is not None:
            # %noloop: play the file once, then silence.
            args.append(f"--use-file-for-fake-audio-capture={Path(wav).resolve()}%noloop")
        browser = playwright_instance.chromium.launch(executable_path=chromium_path, headless=True, args=args)
        browsers.append(browser)
        return browser

    yield launch
    for browser in browsers:
        browser.close()


@dataclass
class Node:
    """A node executable and the arguments that give it a standard WebSocket global."""

    path: str
    version: str
    args: list[str]  # before the script: nothing, --experimental-websocket, or a preload
    websocket: str  # where its WebSocket comes from, for messages

    def command(self, *args: str) -> list[str]:
        return [self.path, *self.args, *args]


NODE_WEBSOCKET_SHIM = HERE / "node_websocket.cjs"


def _node_has_websocket(path: str, args: list[str], env: dict) -> bool:
    probe = "process.exit(typeof WebSocket === 'function' ? 0 : 3)"
    result = subprocess.run([path, *args, "-e", probe], capture_output=True, text=True, env=env, timeout=60)
    return result.returncode == 0


@pytest.fixture(scope="session")
def node() -> Node:
    """Node for the unit tests and the Node client tests. Node 22+ has a WebSocket global,
    Node 20.10+ has one with --experimental-websocket, and Debian 12's Node 18 has none: there
    the WebSocket of Debian's node-ws is preloaded. scripts/bootstrap.sh installs both."""
    path = os.environ.get("STENO_NODE") or shutil.which("node") or shutil.which("nodejs")
    if not path:
        pytest.fail("node is not installed: scripts/bootstrap.sh test installs Debian's nodejs and node-ws "
                    "(or set STENO_NODE)")
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip().lstrip("v")
    try:
        major = int(version.split(".")[0])
    except ValueError:
        pytest.fail(f"cannot tell node's version ({version!r})")
    if major < 18:
        pytest.fail(f"node {version} is too old: the tests need Node 18 or later")
    env = node_env()
    for args, websocket in (([], "its own"), (["--experimental-websocket"], "its own, with --experimental-websocket"),
                            (["--require", str(NODE_WEBSOCKET_SHIM)], "Debian's node-ws")):
        if _node_has_websocket(path, args, env):
            return Node(path, version, args, websocket)
    pytest.fail(f"node {version} has no WebSocket and node-ws is not installed (apt-get install node-ws)")


def node_env() -> dict:
    """The environment for node: Debian's Node packages (node-ws) are found in /usr/share/nodejs."""
    env = dict(os.environ)
    env["NODE_PATH"] = os.pathsep.join(p for p in (env.get("NODE_PATH"), "/usr/share/nodejs") if p)
    return env


# ---- caption paragraphs, as both pages show them -------------------------------------------

PARAGRAPH_GAP = 2.0  # seconds between the end of one final and the start of the next (web-client/page.js)

PARAGRAPHS_JS = """(root) => [...document.querySelectorAll(`${root} .paragraph`)].map((p) => {
  const time = p.querySelector(':scope > .paragraph-time');
  const box = time ? time.getBoundingClientRect() : null;
  const style = time ? getComputedStyle(time) : null;
  return {
    start: Number(p.dataset.start),
    time: time ? time.textContent : null,
    timeVisible: !!box && box.width > 0 && box.height > 0 && style.visibility === 'visible' && style.display !== 'none',
    finals: [...p.querySelectorAll('.final')].map((f) => ({ start: Number(f.dataset.start), end: Number(f.dataset.end) })),
  };
})"""


def clock_label(seconds: float) -> str:
    total = max(0, int(seconds))
    h, m, s = total // 3600, total // 60 % 60, total % 60
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def check_paragraphs(page, root: str, breaks_allowed: bool = False) -> list[dict]:
    """The finals under `root` are in paragraphs: each headed by its start time, visible; a new
    paragraph exactly where the pause from the previous final is PARAGRAPH_GAP or more (with
    `breaks_allowed`, also elsewhere: the page starts one when the microphone is turned on)."""
    paragraphs = page.evaluate(PARAGRAPHS_JS, root)
    assert paragraphs, f"no paragraphs in {root}"
    previous_end = None
    for paragraph in paragraphs:
        assert paragraph["finals"], f"an empty paragraph: {paragraph}"
        first = paragraph["finals"][0]
        assert paragraph["timeVisible"], f"the paragraph's time is not visible: {paragraph}"
        assert abs(paragraph["start"] - first["start"]) < 0.001
        assert paragraph["time"] == clock_label(first["start"]), paragraph
        if previous_end is not None and not breaks_allowed:
            assert first["start"] - previous_end >= PARAGRAPH_GAP - 0.001, f"a paragraph without a pause before it: {paragraph}"
        for a, b in zip(paragraph["finals"], paragraph["finals"][1:]):
            assert b["start"] - a["end"] < PARAGRAPH_GAP, f"a pause of {b['start'] - a['end']:.2f} s inside a paragraph"
        previous_end = paragraph["finals"][-1]["end"]
    return paragraphs
