#!/usr/bin/env python3
"""A fake of YouTube Live's HTTP closed-caption ingestion endpoint (stdlib only).

Imitates the endpoint a live stream's `closedCaptionsIngestionUrl` points at
(http://upload.youtube.com/closedcaption?cid=STREAM_KEY), as described in Google's
"Closed Captions over HTTP for YouTube Live Streams" (support.google.com/youtube/answer/6077032)
and "Post captions using HTTP":

  POST /closedcaption?cid=KEY&seq=N          Content-Type: text/plain (UTF-8)
  body:  <UTC time>[ region:reg1#cue1]         time = YYYY-MM-DDTHH:MM:SS.mmm
         <caption text, "<br>" for a line break>
         <UTC time> ...                        (one or more captions per POST)
  answer: 200 with a body holding the server's current time (YYYY-MM-DDTHH:MM:SS.mmm, UTC),
          which clients use to estimate their clock offset.

Faithful to the documentation:
  * the path /closedcaption, the `cid` and `seq` query parameters, the body format (every
    caption starts with a timestamp line, optionally followed by ` region:...`, then its text
    lines), UTF-8 text, Content-Type text/plain, the timestamp in the 200 answer;
  * `seq` must be in every POST and counts caption POSTs; it is not increased for retries,
    so a POST repeating the last accepted seq with the same body is a retry: answered 200
    again and not counted twice.
  * An empty body is a heartbeat (as clients such as lcyt use it to read the server clock):
    200 with the timestamp, nothing recorded, the seq rules not applied.

Chosen by this fake (YouTube documents no error answers):
  * 403 when `cid` is not --cid; 404 for another path; 405 for another method; 411 without
    a body length; 415 when Content-Type is not text/plain; 400 (body = the reason) for a
    missing/non-integer seq, a body that is not UTF-8 or not well formed, a seq smaller than
    the last accepted one, or the last accepted seq with a different body; with
    --strict-seq also a seq that is not exactly last + 1 (the doc says "increase by one").
  * Timestamps must be exactly YYYY-MM-DDTHH:MM:SS.mmm (a real date; no 'Z' or offset).
  * Failure injection for retry tests: --fail-first N answers the first N POSTs 503 (not
    accepted); --drop-first N accepts (and records) the first N POSTs that would have been
    answered 200 but closes the connection without answering.
  * --clock-offset S makes the fake's clock (the timestamps it answers, and the "skew" it
    records) run S seconds ahead of the real clock (negative: behind).

Records, one JSON line each, to --record FILE (appended, flushed per line):
  accepted: {"seq": N, "received": <unix float>, "stamps": ["2024-...", ...],
             "text": ["caption text (lines joined by \\n)", ...],
             "skew": [<stamp minus the fake's clock, seconds>, ...],
             "regions": [...] only when a caption carried one}
  rejected: {"seq": N or null, "received": ..., "status": 400|403|..., "rejected": "reason"}
Retries and heartbeats are not recorded (they are logged on stderr).

Usage: youtube_ingest.py [--port N] [--cid KEY] [--fail-first N] [--drop-first N]
                         [--clock-offset S] [--strict-seq] [--record FILE] [--quiet]
The first line on stdout is `listening PORT`.  SIGTERM/SIGINT exit 0.
"""

import argparse
import datetime as dt
import http.server
import json
import re
import signal
import socket
import sys
import threading
import time
import urllib.parse

TIMESTAMP_FORMAT = "%Y-%m-%dT%H:%M:%S.%f"
# A caption's first line: the timestamp, optionally " region:<region>" (e.g. reg1#cue1).
TIMESTAMP_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3})(?: region:(\S+))?$")
# Anything that starts like a timestamp but is not one is a client bug, not caption text.
LOOKS_LIKE_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}")

QUIET = False


def log(msg):
    if not QUIET:
        print(f"[fake-youtube] {msg}", file=sys.stderr, flush=True)


def format_timestamp(unix):
    """YYYY-MM-DDTHH:MM:SS.mmm in UTC (milliseconds truncated)."""
    t = dt.datetime.fromtimestamp(unix, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03d" % (t.microsecond // 1000)


def parse_timestamp(text):
    """Unix seconds of a YYYY-MM-DDTHH:MM:SS.mmm UTC timestamp; ValueError if not a date."""
    return dt.datetime.strptime(text, TIMESTAMP_FORMAT).replace(tzinfo=dt.timezone.utc).timestamp()


class BadRequest(Exception):
    pass


def parse_body(body):
    """Split a POST body into captions: a list of (timestamp, region or None, text).

    Each caption is a timestamp line followed by its text lines (possibly none); the text
    keeps "<br>" as sent and joins several lines with "\\n".  Lines may end in CRLF; a final
    newline is optional.  Raises BadRequest with the reason when the body is malformed.
    """
    lines = body.split("\n")
    lines = [line[:-1] if line.endswith("\r") else line for line in lines]
    while lines and lines[-1] == "":
        lines.pop()
    captions = []
    for number, line in enumerate(lines, 1):
        m = TIMESTAMP_LINE.match(line)
        if m:
            try:
                parse_timestamp(m.group(1))
            except ValueError:
                raise BadRequest(f"line {number}: {m.group(1)!r} is not a valid date and time")
            captions.append([m.group(1), m.group(2), []])
        elif LOOKS_LIKE_TIMESTAMP.match(line):
            raise BadRequest(f"line {number}: malformed timestamp line {line!r} "
                             "(expected YYYY-MM-DDTHH:MM:SS.mmm, optionally followed by ' region:reg1#cue1')")
        elif not captions:
            raise BadRequest(f"line {number}: the body must start with a timestamp line "
                             f"(YYYY-MM-DDTHH:MM:SS.mmm), got {line!r}")
        else:
            captions[-1][2].append(line)
    result = []
    for stamp, region, text_lines in captions:
        while text_lines and text_lines[-1] == "":
            text_lines.pop()
        result.append((stamp, region, "\n".join(text_lines)))
    return result


class IngestState:
    """Everything shared between request threads, behind one lock."""

    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.posts_seen = 0  # for --fail-first
        self.drops_left = args.drop_first
        self.last_seq = None  # last accepted caption seq
        self.last_body = None
        self.record_file = open(args.record, "a", encoding="utf-8") if args.record else None

    def now(self):
        """The fake's clock: real time plus --clock-offset."""
        return time.time() + self.args.clock_offset

    def record(self, obj):
        if self.record_file:
            self.record_file.write(json.dumps(obj, ensure_ascii=False) + "\n")
            self.record_file.flush()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as Google's front ends
    server_version = "fake-youtube-ingest"
    sys_version = ""

    state = None  # set by main()

    def log_message(self, fmt, *args):
        log("%s %s" % (self.address_string(), fmt % args))

    # ---- answers ------------------------------------------------------------------------

    def answer(self, status, body, close=False):
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(data)

    def reject(self, status, seq, reason, close=False):
        self.state.record({"seq": seq, "received": time.time(), "status": status, "rejected": reason})
        log(f"rejected seq={seq}: {status} {reason}")
        self.answer(status, reason + "\n", close=close)

    def drop(self):
        """Close the connection without any answer (the POST was accepted)."""
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- methods ------------------------------------------------------------------------

    def do_GET(self):
        self.read_body_or_none()
        self.answer(405, "use POST\n", close=True)

    do_PUT = do_DELETE = do_HEAD = do_PATCH = do_GET

    def read_body_or_none(self):
        """The request body (Content-Length or chunked), or None when neither is given."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            chunks = []
            while True:
                size_line = self.rfile.readline(65537)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline(65537)
        length = self.headers.get("Content-Length")
        if length is None:
            return None
        return self.rfile.read(int(length))

    def do_POST(self):
        state = self.state
        try:
            raw = self.read_body_or_none()
        except ValueError:
            self.answer(400, "bad Content-Length or chunk size\n", close=True)
            return
        url = urllib.parse.urlsplit(self.path)
        if url.path != "/closedcaption":
            self.answer(404, f"no such endpoint {url.path!r}; captions go to /closedcaption\n")
            return
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        seq_text = query.get("seq", [None])[0]
        seq = int(seq_text) if seq_text is not None and re.fullmatch(r"[0-9]+", seq_text) else None

        with state.lock:
            state.posts_seen += 1
            if state.posts_seen <= state.args.fail_first:
                self.reject(503, seq, f"injected failure {state.posts_seen}/{state.args.fail_first} (--fail-first)")
                return

            if raw is None:
                self.reject(411, seq, "a POST needs Content-Length (or chunked transfer encoding)", close=True)
                return
            cids = query.get("cid", [])
            if not cids or cids[0] == "":
                self.reject(403, seq, "missing cid (the stream key)")
                return
            if state.args.cid is not None and cids[0] != state.args.cid:
                self.reject(403, seq, "unknown cid (stream key)")
                return
            if seq_text is None:
                self.reject(400, None, "missing seq")
                return
            if seq is None:
                self.reject(400, None, f"seq must be a non-negative integer, got {seq_text!r}")
                return
            ctype = self.headers.get("Content-Type", "")
            if ctype.split(";")[0].strip().lower() != "text/plain":
                self.reject(415, seq, f"Content-Type must be text/plain, got {ctype!r}")
                return
            try:
                body = raw.decode("utf-8")
            except UnicodeDecodeError:
                self.reject(400, seq, "the body is not valid UTF-8")
                return

            if body.strip() == "":
                log(f"heartbeat seq={seq}")
                self.ok()
                return

            try:
                captions = parse_body(body)
            except BadRequest as e:
                self.reject(400, seq, str(e))
                return

            if state.last_seq is not None:
                if seq == state.last_seq:
                    if body != state.last_body:
                        self.reject(400, seq, f"seq {seq} was already accepted with a different body "
                                              "(a retry must resend the same body; new captions need seq + 1)")
                        return
                    log(f"retry of seq={seq}: answered again, not counted twice")
                    self.ok()
                    return
                if seq < state.last_seq:
                    self.reject(400, seq, f"seq {seq} is smaller than the last accepted seq {state.last_seq}")
                    return
                if state.args.strict_seq and seq != state.last_seq + 1:
                    self.reject(400, seq, f"seq {seq} skips ahead: expected {state.last_seq + 1} (--strict-seq)")
                    return

            state.last_seq, state.last_body = seq, body
            now = state.now()
            entry = {
                "seq": seq,
                "received": time.time(),
                "stamps": [stamp for stamp, _, _ in captions],
                "text": [text for _, _, text in captions],
                "skew": [round(parse_timestamp(stamp) - now, 3) for stamp, _, _ in captions],
            }
            if any(region is not None for _, region, _ in captions):
                entry["regions"] = [region for _, region, _ in captions]
            state.record(entry)
            log(f"accepted seq={seq}: {entry['text']!r}")
            self.ok()

    def ok(self):
        """200 with the fake clock's time -- unless --drop-first says to hang up instead."""
        state = self.state
        if state.drops_left > 0:
            state.drops_left -= 1
            log(f"dropping the connection without an answer ({state.args.drop_first - state.drops_left}"
                f"/{state.args.drop_first}, --drop-first)")
            self.drop()
            return
        self.answer(200, format_timestamp(state.now()))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Fake YouTube Live HTTP caption ingestion endpoint.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="TCP port; 0 picks a free one (default 0)")
    p.add_argument("--cid", default=None, help="the stream key POSTs must carry as cid (default: any)")
    p.add_argument("--fail-first", type=int, default=0, metavar="N", help="answer the first N POSTs with 503")
    p.add_argument("--drop-first", type=int, default=0, metavar="N",
                   help="accept the first N POSTs that would get 200 but close without answering")
    p.add_argument("--clock-offset", type=float, default=0.0, metavar="SECONDS",
                   help="the fake's clock runs this far ahead of real time (negative: behind)")
    p.add_argument("--strict-seq", action="store_true", help="a new seq must be exactly the last accepted + 1")
    p.add_argument("--record", metavar="FILE", help="append one JSON line per accepted or rejected POST")
    p.add_argument("--quiet", action="store_true", help="no log lines on stderr")
    return p.parse_args(argv)


def main(argv=None):
    global QUIET
    args = parse_args(argv)
    QUIET = args.quiet
    Handler.state = IngestState(args)
    server = Server((args.host, args.port), Handler)
    print(f"listening {server.server_address[1]}", flush=True)
    log(f"fake YouTube caption ingestion on http://{args.host}:{server.server_address[1]}/closedcaption")

    def stop(signum, frame):
        # shutdown() waits for serve_forever() to return, so run it off the main thread.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    server.serve_forever(poll_interval=0.1)
    server.server_close()
    if Handler.state.record_file:
        Handler.state.record_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
