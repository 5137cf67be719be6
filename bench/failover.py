#!/usr/bin/env python3
"""An instance lost under load: what its talkers and their viewers lose.

Two `steno serve` instances with Redis behind HAProxy (docs/haproxy/steno.cfg, made to run on
loopback as ClusterTests make it, without TLS); TALKERS talkers (`steno send` at real time,
the LibriVox sentences, each on a channel of its own) and VIEWERS viewers per channel
(`steno listen`), all through HAProxy; KILL_AFTER seconds into the speech the instance with
the most sessions is killed with SIGKILL. Then, per talker: whether it moved, how long after
the kill its new session started and how much audio it sent again, its word errors (against
the reference, beside the talkers that did not move); per viewer: whether it printed exactly
its talker's finals (none lost, none twice), and how long after its talker each final after the
kill reached it. Prints tables; asserts nothing.

    .venv/bin/python bench/failover.py [--engine whisper] [--talkers 6] [--viewers 20] [--kill-after 10]
"""

import argparse
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import wave

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Tests", "whisper"))
from worker_client import errors, normalized  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SPEECH = os.path.join(ROOT, "Tests", "StenoSpeechTests", "Resources", "librivox")
PROXY_SOURCE = "127.0.0.2"  # HAProxy's address towards the instances (`--trusted-proxy`)
# The survivor's admission, sampled each second after the kill (--show-log).
SAMPLED = ("steno_sessions_active", "steno_admission_busy", "steno_admission_utilization", "steno_recognizers_busy",
           "steno_recognizer_waiting_sessions", 'steno_handshakes_refused_total{reason="overload"}')
LINE = re.compile(r"^\[[^\]]*\]\s*(.*)$")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def speech(folder):
    """The folder's sentences as one 16 kHz WAV file, and its reference words."""
    refs = {}
    with open(os.path.join(folder, "transcription")) as f:
        for line in f:
            m = re.match(r"<s> (.*) </s> \((.*)\)", line.strip())
            if m:
                refs[m.group(2)] = m.group(1).lower().split()
    frames, words = b"", []
    for name in sorted(refs):
        with wave.open(os.path.join(folder, name + ".wav")) as w:
            frames += w.readframes(w.getnframes())
        words += refs[name]
    path = os.path.join(tempfile.mkdtemp(prefix="steno-failover-"), "speech.wav")
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(frames)
    return path, words, len(frames) / 32000


class Lines:
    """A child process whose output lines are kept with the time each came."""

    def __init__(self, arguments, **kwargs):
        self.process = subprocess.Popen(arguments, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                        cwd=ROOT, **kwargs)
        self.out, self.err = [], []
        for stream, into in ((self.process.stdout, self.out), (self.process.stderr, self.err)):
            threading.Thread(target=self.read, args=(stream, into), daemon=True).start()

    @staticmethod
    def read(stream, into):
        for line in stream:
            into.append((time.monotonic(), line.rstrip("\n")))

    def finals(self):
        """[(arrival, text)] of the `[start → end] text` lines."""
        return [(t, m.group(1).strip()) for t, line in self.out if (m := LINE.match(line)) and m.group(1).strip()]


def haproxy_configuration(port, instances):
    """docs/haproxy/steno.cfg on loopback: no TLS, no lines that need root, these instances."""
    out = []
    with open(os.path.join(ROOT, "docs", "haproxy", "steno.cfg")) as f:
        lines = f.read().split("\n")
    for line in lines:
        if "# not in the test" in line:
            continue
        if line.startswith("global"):
            out += [line, "    log stdout format raw local0"]
        elif line.startswith("    maxconn "):
            out.append("    maxconn 4000")  # this container's open-file limit is 20,000
        elif "bind :443 ssl" in line:
            out.append(f"    bind 127.0.0.1:{port}")
        elif "default-server" in line:
            out.append(f"{line} source {PROXY_SOURCE}")
        elif (m := re.search(r"server steno(\d) 10\.0\.0\.1\d:8080", line)):
            index = int(m.group(1)) - 1
            if index < len(instances):
                out.append(line[:m.start()] + f"server steno{index + 1} 127.0.0.1:{instances[index]}" + line[m.end():])
        else:
            out.append(line)
    return "\n".join(out) + "\n"


def metric(port, name):
    try:
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except Exception:
        return None
    m = re.search("^" + re.escape(name) + r"(?:\{[^}]*\})? ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def wait(condition, what, timeout=120):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"gave up waiting for {what}")
        time.sleep(0.2)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))] if values else float("nan")


def main():
    parser = argparse.ArgumentParser()
    release = os.path.join(ROOT, ".build", "release", "steno")
    parser.add_argument("--steno", default=release if os.path.exists(release) else os.path.join(ROOT, ".build", "debug", "steno"))
    parser.add_argument("--engine", default="whisper")
    parser.add_argument("--talkers", type=int, default=6)
    parser.add_argument("--viewers", type=int, default=20, help="viewers per talker's channel")
    parser.add_argument("--kill-after", type=float, default=10.0, help="seconds into the speech")
    parser.add_argument("--serve-args", default="", help="more options for both instances, e.g. \"--admit-utilization 0\"")
    parser.add_argument("--show-log", action="store_true", help="print each talker's messages, timed from the kill")
    args = parser.parse_args()

    wav, reference, seconds = speech(SPEECH)
    children = []
    try:
        redis_port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1", "--save", "",
                                  "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        children.append(redis)
        ports = [free_port(), free_port()]
        instances = []
        for port in ports:
            instances.append(subprocess.Popen(
                [args.steno, "serve", "--engine", args.engine, "--host", "127.0.0.1", "--port", str(port),
                 "--redis", f"redis://127.0.0.1:{redis_port}", "--trusted-proxy", PROXY_SOURCE, "--idle-timeout", "0",
                 "--log-level", "warning", "--web-root", "/nonexistent", *shlex.split(args.serve_args)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT))
        children += instances
        for port in ports:
            wait(lambda: metric(port, "steno_sessions_active") is not None, f"the instance on {port}")
            wait(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2).status == 200, "readyz")
        proxy_port = free_port()
        folder = tempfile.mkdtemp(prefix="steno-haproxy-")
        with open(os.path.join(folder, "steno.cfg"), "w") as f:
            f.write(haproxy_configuration(proxy_port, ports))
        proxy = subprocess.Popen(["/usr/sbin/haproxy", "-db", "-f", os.path.join(folder, "steno.cfg")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        children.append(proxy)
        time.sleep(1.5)
        server = f"ws://127.0.0.1:{proxy_port}"

        viewers = {}
        for k in range(args.talkers):
            viewers[k] = [Lines([args.steno, "listen", "--channel", f"c{k}", "--server", server, "--retry-max", "0.5"])
                          for _ in range(args.viewers)]
        everyone = args.talkers * args.viewers
        try:
            wait(lambda: sum(metric(p, "steno_viewers_active") or 0 for p in ports) >= everyone, f"{everyone} viewers", 120)
        except RuntimeError:
            print("a viewer's messages:", "\n".join(line for _, line in viewers[0][0].err[-10:]), file=sys.stderr)
            raise
        talkers = [Lines([args.steno, "send", wav, "--channel", f"c{k}", "--server", server, "--retry-max", "0.5"])
                   for k in range(args.talkers)]
        started = time.monotonic()
        time.sleep(args.kill_after)
        load = [metric(p, "steno_sessions_active") or 0 for p in ports]
        victim = max(range(2), key=lambda i: load[i])
        instances[victim].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        survivor = ports[1 - victim]
        timeline = []

        def sample():
            while time.monotonic() - killed < seconds + 20 and any(t.process.poll() is None for t in talkers):
                timeline.append((time.monotonic() - killed, *(metric(survivor, name) for name in SAMPLED)))
                time.sleep(1)
        threading.Thread(target=sample, daemon=True).start()
        for talker in talkers:
            try:
                talker.process.wait(timeout=seconds * 3 + 60)
            except subprocess.TimeoutExpired:
                talker.process.kill()
        time.sleep(5)  # the viewers' last finals
        for group in viewers.values():
            for viewer in group:
                viewer.process.send_signal(signal.SIGINT)
        for group in viewers.values():
            for viewer in group:
                try:
                    viewer.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    viewer.process.kill()
        time.sleep(0.5)
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()

    print(f"failover benchmark: {args.talkers} talkers (`steno send`, {seconds:.1f} s of LibriVox at real time, "
          f"a channel each) and {args.viewers} viewers per channel (`steno listen`) through HAProxy to two "
          f"`steno serve --engine {args.engine}` with Redis; {load[victim]:.0f} of {sum(load):.0f} sessions' "
          f"instance killed (SIGKILL) {killed - started:.1f} s into the speech.")
    print()
    print(f"{'talker':7} {'moved':6} {'new session after kill s':>25} {'audio held s':>19} {'exit':>5} {'WER':>6}"
          f" {'viewers exact':>14} {'lost':>5} {'twice':>6} {'final delay p50/p95/max s (after kill)':>40}")
    moved_gaps, all_delays, exact_total, lost_total, twice_total = [], [], 0, 0, 0
    wer_moved, wer_stayed = [0, 0], [0, 0]
    for k, talker in enumerate(talkers):
        again = [(t, line) for t, line in talker.err if "reconnected: new session" in line]
        moved = bool(again)
        gap = again[0][0] - killed if moved else None
        lost_at = [line for _, line in talker.err if "connection was lost" in line]
        resent = re.search(r"holding ([0-9.]+) s of audio", lost_at[0]) if moved and lost_at else None
        spoken = talker.finals()
        texts = [text for _, text in spoken]
        wrong = errors(reference, normalized(" ".join(texts)))
        (wer_moved if moved else wer_stayed)[0] += wrong
        (wer_moved if moved else wer_stayed)[1] += len(reference)
        exact = lost = twice = 0
        delays = []
        for viewer in viewers[k]:
            seen = viewer.finals()
            seen_texts = [text for _, text in seen]
            exact += seen_texts == texts
            lost += sum(1 for text in texts if text not in seen_texts)
            twice += len(seen_texts) - len(set(seen_texts)) if len(set(texts)) == len(texts) else 0
            for (said_at, text), (heard_at, heard) in zip(spoken, seen):
                if text == heard and said_at > killed:
                    delays.append(heard_at - said_at)
        exact_total += exact
        lost_total += lost
        twice_total += twice
        all_delays += delays
        if moved:
            moved_gaps.append(gap)
        d = f"{percentile(delays, 50):.2f}/{percentile(delays, 95):.2f}/{max(delays, default=float('nan')):.2f}"
        print(f"{k:<7} {'yes' if moved else 'no':6} {gap if gap is not None else float('nan'):25.2f}"
              f" {float(resent.group(1)) if resent else 0.0:19.1f} {talker.process.returncode:5d}"
              f" {wrong / len(reference) * 100:5.1f}% {exact:>8}/{len(viewers[k]):<5} {lost:5d} {twice:6d} {d:>40}")
    if args.show_log:
        print("the survivor after the kill:", "s", *(n.replace("steno_", "") for n in SAMPLED))
        for row in timeline:
            print(f"  {row[0]:5.1f}", *row[1:])
        for k, talker in enumerate(talkers):
            print(f"talker {k}:", *(f"  {t - killed:+.2f} s {line}" for t, line in talker.err), sep="\n")
    print()
    print(f"moved talkers: {len(moved_gaps)}; new session after the kill p50 {percentile(moved_gaps, 50):.2f} s, "
          f"max {max(moved_gaps, default=float('nan')):.2f} s")
    for name, (wrong, total) in (("moved", wer_moved), ("stayed", wer_stayed)):
        if total:
            print(f"WER of the talkers that {name}: {wrong / total * 100:.1f} %")
    print(f"viewers with exactly their talker's finals: {exact_total}/{args.talkers * args.viewers}; "
          f"finals lost {lost_total}, printed twice {twice_total}; after the kill, viewer behind talker "
          f"p50 {percentile(all_delays, 50):.2f} s, p95 {percentile(all_delays, 95):.2f} s")


if __name__ == "__main__":
    main()
