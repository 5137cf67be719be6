#!/bin/sh
# Soak (issue 12; `make soak`): one `steno serve`, CLIENTS clients churning sessions against it
# for MINUTES minutes and VIEWERS viewers following their channels, and a check that the
# server's memory and descriptors do not grow and that it stays healthy. Not part of `make
# test` (it takes minutes); docs/reliability.md reports its runs.
#
#   scripts/soak.sh                          10 minutes, 6 clients, 3 viewers, the debug build
#   MINUTES=2 CLIENTS=4 scripts/soak.sh      shorter
#   STENO=.build/release/steno scripts/soak.sh
#   ENGINE=pocketsphinx scripts/soak.sh      the other engine (default: whisper, the server's own)
#
# Each client, over and over (seeded, SEED): connects to /v1/stream, sends `start` (published on
# channel soak-N, N the client's number) and 16 kHz
# PCM speech (beckett.wav, 10 s) in 100 ms messages at SPEED times real time (default 1), and
# then one of: the whole file, `finalize`, `end`, and waits for `ended` and the close (clean);
# part of it, then drops the TCP connection without a close frame (vanished: the session waits
# --resume-seconds for a resume that never comes); part, then half a frame and the drop (torn);
# part, then `cancel` (cancelled); or part, then 20,000 `finalize` without reading, until the
# server closes it as a slow consumer, then reads (flood: it must find the 4008 close frame, or
# at least not a reset before it). A refused handshake (503: full or busy) is retried after 1 s.
# Each viewer, over and over: joins /v1/listen?channel=soak-N (N at random) for 1-5 s, reading
# what comes, and leaves with a close frame or by dropping the connection.
#
# Every SAMPLE seconds the server's resident memory (VmRSS), open descriptors (/proc/PID/fd),
# /healthz and its sessions, and the recognizers made so far, are recorded. At the end, once
# the clients have stopped and the sessions are gone, it checks: /healthz answered 200 every
# time; no session is left; the descriptors are back to what they were before the first client
# (give or take 8); resident memory over the last third of the run grew by at most
# RSS_GROWTH_PCT % (default 10) over the first third after WARMUP seconds (default 120: the
# shared recognizers, ≈95 MB each, are made as sessions first need them); no `internal` error
# was counted; no client or viewer saw anything but the protocol's events; no viewer is left. The
# Whisper worker's memory is sampled too (it must not grow either). Prints the samples and a
# summary; exits 1 if a check fails.
set -eu
cd "$(dirname "$0")/.."

MINUTES=${MINUTES:-10}
CLIENTS=${CLIENTS:-6}
VIEWERS=${VIEWERS:-3}
ENGINE=${ENGINE:-whisper}
SPEED=${SPEED:-1}
WARMUP=${WARMUP:-120}
SAMPLE=${SAMPLE:-10}
SEED=${SEED:-12}
RSS_GROWTH_PCT=${RSS_GROWTH_PCT:-10}
STENO=${STENO:-.build/debug/steno}
OUT=${OUT:-.build/soak}
AUDIO=${AUDIO:-Tests/StenoServerTests/Resources/beckett.wav}

. scripts/lib.sh
# Dropped sessions are kept 5 s for a resume instead of 30, so that churn does not pile them
# up; a flooding client is closed after 64 KB of unread events.
steno_serve soak 60 --engine "$ENGINE" --resume-seconds 5 --outbound-bytes 65536 --log-level warning

echo "soak: $(date -u +%Y-%m-%dT%H:%M:%SZ), load average $(cut -d' ' -f1-3 /proc/loadavg), $STENO --engine $ENGINE (pid $SERVER, port $PORT), $CLIENTS clients and $VIEWERS viewers for $MINUTES min, seed $SEED"
python3 - "$PORT" "$SERVER" "$MINUTES" "$CLIENTS" "$SAMPLE" "$SEED" "$RSS_GROWTH_PCT" "$AUDIO" "$SPEED" "$WARMUP" "$VIEWERS" <<'EOF'
import base64, json, os, random, socket, struct, sys, threading, time, urllib.request, wave

port, pid, minutes, clients, sample, seed, growth_pct, audio, speed, warmup, viewers = sys.argv[1:]
port, pid, clients, seed, viewers = int(port), int(pid), int(clients), int(seed), int(viewers)
minutes, sample, growth_pct, speed, warmup = float(minutes), float(sample), float(growth_pct), float(speed), float(warmup)
w = wave.open(audio)
assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (16000, 1, 2), audio
pcm = w.readframes(w.getnframes())
chunks = [pcm[i:i + 3200] for i in range(0, len(pcm), 3200)]  # 100 ms each
def start(n):
    return json.dumps({"type": "start", "channel": "soak-%d" % n,
                       "audio": {"encoding": "pcm_s16le", "sampleRate": 16000, "channels": 1}})

def frame(opcode, payload):
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n < 126: head += bytes([0x80 | n])
    elif n < 65536: head += bytes([0x80 | 126]) + struct.pack(">H", n)
    else: head += bytes([0x80 | 127]) + struct.pack(">Q", n)
    masked = bytes(b ^ mask[i & 3] for i, b in enumerate(payload))
    return head + mask + masked

class Closed(Exception):
    pass

class Client:
    """A WebSocket client on a plain socket: enough of RFC 6455 for this script."""
    def __init__(self, path="/v1/stream"):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                        "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: %s\r\n\r\n" % (path, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            d = self.s.recv(4096)
            if not d: raise Closed("no handshake answer")
            head += d
        head, self.buf = head.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ", 2)[1])
    def send(self, opcode, payload):
        self.s.sendall(frame(opcode, payload))
    def events(self, block):
        """Whole frames received so far (waiting for one if `block`): (opcode, payload)."""
        out = []
        if block: self.s.settimeout(30)
        else: self.s.setblocking(False)
        try:
            while True:
                try:
                    d = self.s.recv(65536)
                except (BlockingIOError, socket.timeout):
                    break
                if not d: raise Closed("end of stream")
                self.buf += d
                while True:
                    f = self.take()
                    if f is None: break
                    out.append(f)
                if out or not block: break
        finally:
            self.s.settimeout(30)
        while True:
            f = self.take()
            if f is None: break
            out.append(f)
        return out
    def take(self):
        b = self.buf
        if len(b) < 2: return None
        n, h = b[1] & 0x7F, 2
        if n == 126:
            if len(b) < 4: return None
            n, h = struct.unpack(">H", b[2:4])[0], 4
        elif n == 127:
            if len(b) < 10: return None
            n, h = struct.unpack(">Q", b[2:10])[0], 10
        if len(b) < h + n: return None
        self.buf = b[h + n:]
        return b[0] & 0x0F, b[h:h + n]
    def drop(self):
        self.s.close()

counts = {}
problems = []
lock = threading.Lock()
deadline = time.time() + minutes * 60

def count(what):
    with lock: counts[what] = counts.get(what, 0) + 1

def problem(what):
    with lock:
        if len(problems) < 20: problems.append(what)

def check(f, seen):
    """Every text frame must be an event of the protocol; returns the closes and types seen."""
    opcode, payload = f
    if opcode == 1:
        e = json.loads(payload)
        seen.append(e["type"])
        if e["type"] == "error" and e.get("code") == "internal": problem("internal error: %s" % e)
    elif opcode == 8:
        code = struct.unpack(">H", payload[:2])[0] if len(payload) >= 2 else None
        seen.append("close %s" % code)

def until(c, wanted, seen, limit=120):
    end = time.time() + limit
    while time.time() < end:
        for f in c.events(True):
            check(f, seen)
            if seen and seen[-1] in wanted: return True
    return False

def session(r, n):
    seen = []
    kind = r.choice(["clean", "clean", "vanished", "torn", "cancelled", "flood"])
    try:
        run(r, kind, seen, n)
    except (Closed, ConnectionResetError) as e:
        # The server ended the connection without a close frame: a reset, or a cut.
        problem("%s session: %s after %s" % (kind, type(e).__name__, seen[-3:]))

def run(r, kind, seen, n):
    c = Client()
    if c.status == 503:
        count("refused (503)"); c.drop(); time.sleep(1); return
    if c.status != 101:
        problem("handshake answered %d" % c.status); c.drop(); return
    c.send(1, start(n).encode())
    stop_at = len(chunks) if kind == "clean" else r.randrange(1, len(chunks))
    began = time.time()
    for n, chunk in enumerate(chunks[:stop_at]):
        time.sleep(max(0, began + n * 0.1 / speed - time.time()))
        c.send(2, chunk)
        for f in c.events(False): check(f, seen)
    if kind == "clean":
        c.send(1, b'{"type":"finalize"}')
        c.send(1, b'{"type":"end"}')
        ok = until(c, {"close 1000"}, seen)
        if not ok or "ended" not in seen: problem("clean session: %s" % seen[-5:])
        c.send(8, struct.pack(">H", 1000))
    elif kind == "cancelled":
        c.send(1, b'{"type":"cancel"}')
        if not until(c, {"close 1000"}, seen) or "cancelled" not in seen: problem("cancel: %s" % seen[-5:])
        c.send(8, struct.pack(">H", 1000))
    elif kind == "torn":
        c.s.sendall(frame(2, chunks[0])[:50])
    elif kind == "flood":
        # ≈1.2 MB of `finalized` answers: far past the 64 KB outbound limit and the socket
        # buffers. Nothing is read meanwhile (reading would relieve the server), for at most 5 s
        # of sending and 3 s of waiting for the server to give up on a client, then everything
        # is read: within the close's 10 s flush deadline, past which a client that reads nothing
        # is cut without a close frame.
        before = metric('steno_errors_total{code="slow_consumer"}')
        burst = frame(1, b'{"type":"finalize"}') * 1000
        c.s.settimeout(2)
        stop = time.time() + 5
        whole = True  # a send that timed out may have left half a frame
        try:
            for _ in range(20):
                c.s.sendall(burst)
                if time.time() > stop or metric('steno_errors_total{code="slow_consumer"}') > before: break
        except (socket.timeout, OSError):
            whole = False
        c.s.settimeout(30)
        wait = time.time() + 3
        while time.time() < wait and metric('steno_errors_total{code="slow_consumer"}') <= before:
            time.sleep(0.2)
        if whole:
            try:
                c.send(1, b'{"type":"end"}')  # if the server has not given up on it
            except OSError:
                pass
        until(c, {"close 4008", "close 1000", "close 4010", "close 1002", "close 1009"}, seen, limit=120)
        count("flood: " + (seen[-1] if seen and seen[-1].startswith("close") else "no close frame"))
    count(kind)
    c.drop()

def worker(n):
    r = random.Random(seed * 1000 + n)
    while time.time() < deadline:
        try:
            session(r, n)
        except (Closed, OSError) as e:
            count("connection error")
            if not isinstance(e, (ConnectionResetError, BrokenPipeError)): problem("client %d: %r" % (n, e))

def viewer(n):
    """Joins a client's channel for 1-5 s, reads what comes, and leaves (close frame or drop)."""
    r = random.Random(seed * 1000 + 500 + n)
    while time.time() < deadline:
        seen = []
        try:
            c = Client("/v1/listen?channel=soak-%d" % r.randrange(clients))
            if c.status != 101:
                problem("viewer handshake answered %d" % c.status); c.drop(); time.sleep(1); continue
            leave = time.time() + r.uniform(1, 5)
            while time.time() < leave:
                for f in c.events(False):
                    if f[0] == 1:
                        kind = json.loads(f[1]).get("type")
                        if kind not in VIEWER_EVENTS: problem("viewer got %r" % f[1][:80])
                    elif f[0] == 8:
                        problem("viewer closed by the server: %r" % f[1][:40])
                time.sleep(0.1)
            if r.random() < 0.5:
                c.send(8, struct.pack(">H", 1000))
                count("viewer left")
            else:
                count("viewer vanished")
            c.drop()
        except (Closed, OSError) as e:
            problem("viewer %d: %r" % (n, e))

VIEWER_EVENTS = {"joined", "volatile", "final", "speech", "publisher", "relay", "gap"}

def server_state():
    with open("/proc/%d/status" % pid) as f:
        rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    fds = len(os.listdir("/proc/%d/fd" % pid))
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=10) as h:
            status, body = h.status, json.loads(h.read())
    except Exception as e:
        status, body = repr(e), {}
    try:
        recognizers = metric("steno_recognizers_created_total")
    except Exception:
        recognizers = None
    return rss, fds, status, body.get("sessions"), recognizers, body.get("viewers"), worker_rss()

def worker_rss():
    """The Whisper worker's resident memory (KB), if it runs: the server's child."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open("/proc/%s/status" % entry) as f:
                    fields = dict(l.split(":", 1) for l in f if ":" in l)
                if int(fields["PPid"]) == pid:
                    return int(fields["VmRSS"].split()[0])
            except (OSError, KeyError, ValueError):
                pass
    return None

def metric(name):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as h:
        for line in h.read().decode().splitlines():
            if line.startswith(name + " "): return float(line.split()[-1])
    return 0.0

base_rss, base_fds, _, _, _, _, base_worker = server_state()
threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(clients)]
threads += [threading.Thread(target=viewer, args=(n,), daemon=True) for n in range(viewers)]
for t in threads: t.start()
began = time.time()
samples = []
print("   t (s)  RSS (MB)  fds  /healthz  sessions  recognizers  viewers  worker RSS (MB)")
print("%8.0f  %8.1f  %3d  (before the clients)" % (0, base_rss / 1024, base_fds))
while time.time() < deadline:
    time.sleep(min(sample, max(0.1, deadline - time.time())))
    rss, fds, status, sessions, recognizers, viewing, wrss = server_state()
    samples.append((time.time() - began, rss, fds, status, sessions, wrss))
    print("%8.0f  %8.1f  %3d  %8s  %8s  %11s  %7s  %15s" % (samples[-1][0], rss / 1024, fds, status, sessions, recognizers,
                                                       viewing, "%.1f" % (wrss / 1024) if wrss else "-"), flush=True)
for t in threads: t.join(timeout=240)
# The last dropped sessions wait --resume-seconds, and what they had is analyzed; then nothing
# is left.
settle = time.time() + 120
while time.time() < settle:
    rss, fds, status, sessions, recognizers, viewing, wrss = server_state()
    if sessions == 0 and not viewing and fds <= base_fds + 8: break
    time.sleep(1)
print("%8.0f  %8.1f  %3d  %8s  %8s  %11s  (clients stopped)" % (time.time() - began, rss / 1024, fds, status, sessions, recognizers))

failed = []
if any(s[3] != 200 for s in samples): failed.append("/healthz did not always answer 200")
if sessions != 0: failed.append("%s sessions left after the clients stopped" % sessions)
if viewing: failed.append("%s viewers left after they stopped" % viewing)
if fds > base_fds + 8: failed.append("%d descriptors open at the end, %d before" % (fds, base_fds))
steady = [s for s in samples if s[0] >= warmup] or samples
third = max(1, len(steady) // 3)
first = sum(s[1] for s in steady[:third]) / third
last = sum(s[1] for s in steady[-third:]) / third
growth = (last - first) / first * 100
if growth > growth_pct: failed.append("resident memory grew %.1f %% from the first third to the last" % growth)
workers = [s[5] for s in steady if s[5]]
worker_growth = 0.0
if len(workers) >= 3:
    wt = max(1, len(workers) // 3)
    wfirst, wlast = sum(workers[:wt]) / wt, sum(workers[-wt:]) / wt
    worker_growth = (wlast - wfirst) / wfirst * 100
    if worker_growth > growth_pct: failed.append("the worker's resident memory grew %.1f %%" % worker_growth)
internal = metric('steno_errors_total{code="internal"}')
if internal: failed.append("%d internal errors counted" % internal)
if problems: failed.append("client problems: %s" % "; ".join(problems))
total = sum(v for k, v in counts.items() if k in ("clean", "vanished", "torn", "cancelled", "flood"))
if viewers and not (counts.get("viewer left", 0) + counts.get("viewer vanished", 0)): failed.append("no viewer came and went")
if not counts.get("clean"): failed.append("no session ended cleanly")
print("sessions: %d (%s)" % (total, ", ".join("%s %d" % kv for kv in sorted(counts.items()))))
print("RSS: %.1f MB before, %.1f MB mean over the first third after the warm-up, %.1f MB over the last (%+.1f %%), peak %.1f MB; "
      "descriptors: %d before, %d at the end, peak %d" % (base_rss / 1024, first / 1024, last / 1024, growth,
      max(s[1] for s in samples) / 1024, base_fds, fds, max(s[2] for s in samples)))
if workers: print("worker RSS: %.1f MB at the start, %.1f MB at the end (%+.1f %% from the first third to the last)"
                  % ((base_worker or workers[0]) / 1024, workers[-1] / 1024, worker_growth))
print("soak: " + ("FAILED: " + "; ".join(failed) if failed else "passed"))
sys.exit(1 if failed else 0)
EOF
