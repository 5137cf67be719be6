#!/usr/bin/env python3
"""Self-test of the two fakes (stdlib unittest only): python3 scripts/fakes/test_fakes.py

Each test starts a fake as a subprocess (`--port 0`, reads `listening PORT`) and talks to it
with a minimal client written here: a hand-made RFC 6455 client for obs_websocket.py and
http.client for youtube_ingest.py.
"""

import base64
import datetime as dt
import hashlib
import http.client
import importlib.util
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
OBS = os.path.join(HERE, "obs_websocket.py")
YOUTUBE = os.path.join(HERE, "youtube_ingest.py")


def load_module(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


obs_module = load_module(OBS, "obs_websocket_fake")


class Fake:
    """A fake server running as a subprocess."""

    def __init__(self, script, *args):
        self.record = tempfile.NamedTemporaryFile(prefix="fake-record-", suffix=".jsonl", delete=False).name
        self.proc = subprocess.Popen(
            [sys.executable, script, "--port", "0", "--record", self.record, "--quiet", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("listening "):
            self.proc.kill()
            raise RuntimeError(f"fake did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split()[1])

    def records(self):
        with open(self.record, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        os.unlink(self.record)
        return code


# ------------------------------------------------------------------------------------------
# A minimal obs-websocket client
# ------------------------------------------------------------------------------------------


class ServerClosed(Exception):
    def __init__(self, code, reason):
        super().__init__(f"closed {code} {reason!r}")
        self.code = code
        self.reason = reason


class WsClient:
    def __init__(self, port, protocols=("obswebsocket.json",), timeout=5.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET / HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket", "Connection: Upgrade",
                 f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
        if protocols:
            lines.append("Sec-WebSocket-Protocol: " + ", ".join(protocols))
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                break
            self.buf += chunk
        head, _, self.buf = self.buf.partition(b"\r\n\r\n")
        head_lines = head.decode("latin-1").split("\r\n")
        self.status_line = head_lines[0]
        self.headers = {}
        for line in head_lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        self.accepted = self.status_line.startswith("HTTP/1.1 101")
        if self.accepted:
            expect = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
            assert self.headers["sec-websocket-accept"] == expect.decode(), "bad Sec-WebSocket-Accept"

    def _recv_exact(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def send_frame(self, opcode, payload, fin=True, mask=True):
        b0 = (0x80 if fin else 0) | opcode
        n = len(payload)
        if n < 126:
            header = struct.pack("!BB", b0, (0x80 if mask else 0) | n)
        elif n < 65536:
            header = struct.pack("!BBH", b0, (0x80 if mask else 0) | 126, n)
        else:
            header = struct.pack("!BBQ", b0, (0x80 if mask else 0) | 127, n)
        if mask:
            key = os.urandom(4)
            payload = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
            header += key
        self.sock.sendall(header + payload)

    def recv_frame(self):
        b0, b1 = self._recv_exact(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", self._recv_exact(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", self._recv_exact(8))
        assert not b1 & 0x80, "server frames must not be masked"
        return b0 & 0x0F, self._recv_exact(n)

    def recv(self):
        """The next JSON message; raises ServerClosed on a close frame (after answering it)."""
        while True:
            opcode, payload = self.recv_frame()
            if opcode == 0x1:
                return json.loads(payload)
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                try:
                    self.send_frame(0x8, payload[:2])
                except OSError:
                    pass
                raise ServerClosed(code, payload[2:].decode())
            if opcode == 0xA:
                return {"pong": payload.decode()}

    def send(self, obj):
        self.send_frame(0x1, json.dumps(obj).encode())

    def identify(self, password=None, subscriptions=None):
        hello = self.recv()
        assert hello["op"] == 0, hello
        d = {"rpcVersion": 1}
        auth = hello["d"].get("authentication")
        if auth is not None and password is not None:
            secret = base64.b64encode(hashlib.sha256((password + auth["salt"]).encode()).digest()).decode()
            d["authentication"] = base64.b64encode(
                hashlib.sha256((secret + auth["challenge"]).encode()).digest()).decode()
        if subscriptions is not None:
            d["eventSubscriptions"] = subscriptions
        self.send({"op": 1, "d": d})
        return hello, self.recv()

    def request(self, request_type, data=None, request_id="r1"):
        d = {"requestType": request_type, "requestId": request_id}
        if data is not None:
            d["requestData"] = data
        self.send({"op": 6, "d": d})
        while True:
            msg = self.recv()
            if msg.get("op") == 7:
                return msg["d"]

    def close(self):
        try:
            self.send_frame(0x8, struct.pack("!H", 1000))
            while True:
                opcode, _ = self.recv_frame()
                if opcode == 0x8:
                    break
        except (OSError, ConnectionError):
            pass
        self.sock.close()


# ------------------------------------------------------------------------------------------
# obs_websocket.py
# ------------------------------------------------------------------------------------------


class CaptionRowsTest(unittest.TestCase):
    """obs_caption_rows(): libobs truncation + libcaption wrapping, without a server."""

    def rows(self, text):
        return obs_module.obs_caption_rows(text)[1]

    def test_40_characters_wrap_at_the_last_space_within_32_columns(self):
        self.assertEqual(self.rows("Live captions wrap at thirty-two columns"),
                         ["Live captions wrap at thirty-two", "columns"])

    def test_newline_starts_a_row_and_blank_lines_collapse(self):
        self.assertEqual(self.rows("one\ntwo\r\n\nthree"), ["one", "two", "three"])

    def test_long_word_is_cut_at_32_columns(self):
        self.assertEqual(self.rows("x" * 40), ["x" * 32, "x" * 8])

    def test_only_128_bytes_are_kept(self):
        kept, rows = obs_module.obs_caption_rows("word " * 40)
        self.assertEqual(kept, ("word " * 40)[:128])
        self.assertEqual(len(rows), 5)
        self.assertEqual(rows[-1], "word wor")
        kept, _ = obs_module.obs_caption_rows("é" * 70)  # 2 bytes each: 64 kept
        self.assertEqual(kept, "é" * 64)

    def test_unrepresentable_character_ends_its_row(self):
        self.assertEqual(self.rows("hello \U0001F600 world"), ["hello"])

    def test_at_most_15_rows(self):
        self.assertEqual(len(self.rows("\n".join("r%d" % i for i in range(30)))), 15)


class ObsWebSocketTest(unittest.TestCase):
    def start(self, *args):
        fake = Fake(OBS, *args)
        self.addCleanup(lambda: self.assertEqual(fake.stop(), 0, "the fake must exit 0 on SIGTERM"))
        return fake

    def client(self, fake, **kw):
        c = WsClient(fake.port, **kw)
        self.addCleanup(c.sock.close)
        return c

    def test_hello_and_identify_without_password(self):
        fake = self.start()
        c = self.client(fake)
        self.assertEqual(c.headers.get("sec-websocket-protocol"), "obswebsocket.json")
        hello, identified = c.identify()
        self.assertEqual(hello["d"]["rpcVersion"], 1)
        self.assertNotIn("authentication", hello["d"])
        self.assertEqual(identified, {"op": 2, "d": {"negotiatedRpcVersion": 1}})
        version = c.request("GetVersion")
        self.assertEqual(version["requestStatus"], {"result": True, "code": 100})
        self.assertIn("SendStreamCaption", version["responseData"]["availableRequests"])
        c.close()

    def test_no_subprotocol_means_json(self):
        fake = self.start()
        c = self.client(fake, protocols=())
        self.assertTrue(c.accepted)
        self.assertNotIn("sec-websocket-protocol", c.headers)
        self.assertEqual(c.identify()[1]["op"], 2)

    def test_msgpack_only_is_refused(self):
        fake = self.start()
        c = self.client(fake, protocols=("obswebsocket.msgpack",))
        self.assertFalse(c.accepted)
        self.assertIn("400", c.status_line)

    def test_right_password(self):
        fake = self.start("--password", "s3cret")
        c = self.client(fake)
        hello, identified = c.identify(password="s3cret")
        self.assertEqual(set(hello["d"]["authentication"]), {"challenge", "salt"})
        self.assertEqual(identified["op"], 2)

    def test_wrong_password_closes_4009(self):
        fake = self.start("--password", "s3cret")
        c = self.client(fake)
        with self.assertRaises(ServerClosed) as cm:
            c.identify(password="wrong")
        self.assertEqual((cm.exception.code, cm.exception.reason), (4009, "Authentication failed."))

    def test_missing_authentication_closes_4009(self):
        fake = self.start("--password", "s3cret")
        c = self.client(fake)
        with self.assertRaises(ServerClosed) as cm:
            c.identify(password=None)
        self.assertEqual(cm.exception.code, 4009)
        self.assertIn("missing an `authentication` string", cm.exception.reason)

    def test_request_before_identify_closes_4007(self):
        fake = self.start()
        c = self.client(fake)
        c.recv()  # Hello
        c.send({"op": 6, "d": {"requestType": "GetVersion", "requestId": "x"}})
        with self.assertRaises(ServerClosed) as cm:
            c.recv()
        self.assertEqual(cm.exception.code, 4007)

    def test_unmasked_frame_is_a_protocol_error(self):
        fake = self.start()
        c = self.client(fake)
        c.recv()
        c.send_frame(0x1, b'{"op":1,"d":{"rpcVersion":1}}', mask=False)
        with self.assertRaises(ServerClosed) as cm:
            c.recv()
        self.assertEqual(cm.exception.code, 1002)

    def test_caption_output_not_running_then_recorded_rejection(self):
        fake = self.start()
        c = self.client(fake)
        c.identify()
        r = c.request("SendStreamCaption", {"captionText": "hello"}, request_id="abc")
        self.assertEqual(r["requestType"], "SendStreamCaption")
        self.assertEqual(r["requestId"], "abc")
        self.assertEqual(r["requestStatus"], {"result": False, "code": 501})
        missing = c.request("SendStreamCaption", {})
        self.assertEqual(missing["requestStatus"]["code"], 300)
        self.assertIn("captionText", missing["requestStatus"]["comment"])
        unknown = c.request("NoSuchRequest")
        self.assertEqual(unknown["requestStatus"]["code"], 204)
        c.close()
        self.assertEqual([r.get("rejected") for r in fake.records()], ["hello"])

    def test_streaming_after_event_then_caption_and_rows(self):
        fake = self.start("--streaming-after", "0.5")
        c = self.client(fake)
        c.identify(subscriptions=1 << 6)
        self.assertEqual(c.request("SendStreamCaption", {"captionText": "too early"})["requestStatus"]["code"], 501)
        states = []
        while "OBS_WEBSOCKET_OUTPUT_STARTED" not in states:
            msg = c.recv()
            self.assertEqual(msg["op"], 5)
            self.assertEqual(msg["d"]["eventType"], "StreamStateChanged")
            self.assertEqual(msg["d"]["eventIntent"], 64)
            states.append(msg["d"]["eventData"]["outputState"])
        self.assertEqual(states, ["OBS_WEBSOCKET_OUTPUT_STARTING", "OBS_WEBSOCKET_OUTPUT_STARTED"])
        status = c.request("GetStreamStatus")
        self.assertTrue(status["responseData"]["outputActive"])
        text = "Live captions wrap at thirty-two columns"
        self.assertEqual(len(text), 40)
        self.assertEqual(c.request("SendStreamCaption", {"captionText": text})["requestStatus"],
                         {"result": True, "code": 100})
        c.close()
        records = fake.records()
        self.assertEqual(records[0]["rejected"], "too early")
        self.assertEqual(records[1]["text"], text)
        self.assertEqual(records[1]["rows"], ["Live captions wrap at thirty-two", "columns"])

    def test_start_stop_statuses(self):
        fake = self.start("--streaming")
        c = self.client(fake)
        c.identify(subscriptions=0)  # no events
        self.assertEqual(c.request("StartStream")["requestStatus"]["code"], 500)
        self.assertEqual(c.request("StopStream")["requestStatus"]["code"], 100)
        time.sleep(0.1)
        self.assertEqual(c.request("StopStream")["requestStatus"]["code"], 501)
        self.assertFalse(c.request("GetStreamStatus")["responseData"]["outputActive"])
        self.assertEqual(c.request("StartStream")["requestStatus"]["code"], 100)
        time.sleep(0.1)
        self.assertTrue(c.request("GetStreamStatus")["responseData"]["outputActive"])

    def test_fragmented_message_with_ping_in_between(self):
        fake = self.start()
        c = self.client(fake)
        c.identify()
        msg = json.dumps({"op": 6, "d": {"requestType": "GetStreamStatus", "requestId": "frag"}}).encode()
        c.send_frame(0x1, msg[:10], fin=False)
        c.send_frame(0x9, b"are you there")
        c.send_frame(0x0, msg[10:20], fin=False)
        c.send_frame(0x0, msg[20:], fin=True)
        self.assertEqual(c.recv(), {"pong": "are you there"})
        self.assertEqual(c.recv()["d"]["requestId"], "frag")

    def test_two_clients_at_once_and_sigterm(self):
        fake = self.start("--streaming")
        a, b = self.client(fake), self.client(fake)
        a.identify()
        b.identify()
        self.assertEqual(a.request("SendStreamCaption", {"captionText": "from a"})["requestStatus"]["code"], 100)
        self.assertEqual(b.request("SendStreamCaption", {"captionText": "from b"})["requestStatus"]["code"], 100)
        fake.proc.send_signal(signal.SIGTERM)
        with self.assertRaises(ServerClosed) as cm:
            a.recv()
        self.assertEqual((cm.exception.code, cm.exception.reason), (1001, "Server stopping."))
        self.assertEqual(fake.proc.wait(timeout=10), 0)


# ------------------------------------------------------------------------------------------
# youtube_ingest.py
# ------------------------------------------------------------------------------------------


def stamp(offset=0.0):
    t = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=offset)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + "%03d" % (t.microsecond // 1000)


class YouTubeIngestTest(unittest.TestCase):
    def start(self, *args):
        fake = Fake(YOUTUBE, "--cid", "KEY", *args)
        self.addCleanup(lambda: self.assertEqual(fake.stop(), 0, "the fake must exit 0 on SIGTERM"))
        return fake

    def post(self, fake, seq, body, cid="KEY", content_type="text/plain; charset=utf-8"):
        conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=5)
        try:
            conn.request("POST", f"/closedcaption?cid={cid}&seq={seq}", body.encode("utf-8"),
                         {"Content-Type": content_type})
            resp = conn.getresponse()
            return resp.status, resp.read().decode()
        finally:
            conn.close()

    def test_accepted_and_server_time(self):
        fake = self.start()
        body = f"{stamp()} region:reg1#cue1\nHELLO<br>WORLD\n{stamp(0.1)}\nsecond\n"
        status, answer = self.post(fake, 1, body)
        self.assertEqual(status, 200)
        server_time = dt.datetime.strptime(answer.strip(), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
        self.assertLess(abs(server_time.timestamp() - time.time()), 5)
        [rec] = fake.records()
        self.assertEqual(rec["seq"], 1)
        self.assertEqual(rec["text"], ["HELLO<br>WORLD", "second"])
        self.assertEqual(rec["regions"], ["reg1#cue1", None])
        self.assertEqual(len(rec["stamps"]), 2)

    def test_retry_smaller_seq_and_changed_body(self):
        fake = self.start()
        body = f"{stamp()}\nfirst\n"
        self.assertEqual(self.post(fake, 5, body)[0], 200)
        self.assertEqual(self.post(fake, 5, body)[0], 200)  # retry: same seq, same body
        self.assertEqual(self.post(fake, 5, f"{stamp()}\nchanged\n")[0], 400)
        self.assertEqual(self.post(fake, 4, f"{stamp()}\nolder\n")[0], 400)
        self.assertEqual(self.post(fake, 6, f"{stamp()}\nnext\n")[0], 200)
        records = fake.records()
        self.assertEqual([r["seq"] for r in records if "text" in r], [5, 6])
        self.assertEqual(len([r for r in records if "rejected" in r]), 2)

    def test_bad_requests(self):
        fake = self.start()
        self.assertEqual(self.post(fake, 1, f"{stamp()}\nx\n", cid="OTHER")[0], 403)
        self.assertEqual(self.post(fake, "one", f"{stamp()}\nx\n")[0], 400)
        self.assertEqual(self.post(fake, 1, "no timestamp here\n")[0], 400)
        self.assertEqual(self.post(fake, 1, "2024-01-01T00:00:00Z\nx\n")[0], 400)
        self.assertEqual(self.post(fake, 1, f"{stamp()}\nx\n", content_type="application/json")[0], 415)

    def test_fail_first(self):
        fake = self.start("--fail-first", "2")
        body = f"{stamp()}\nhello\n"
        self.assertEqual(self.post(fake, 1, body)[0], 503)
        self.assertEqual(self.post(fake, 1, body)[0], 503)
        self.assertEqual(self.post(fake, 1, body)[0], 200)
        self.assertEqual([r.get("status") for r in fake.records()], [503, 503, None])

    def test_drop_first_then_retry_is_not_a_duplicate(self):
        fake = self.start("--drop-first", "1")
        body = f"{stamp()}\nhello\n"
        with self.assertRaises((http.client.RemoteDisconnected, ConnectionError)):
            self.post(fake, 1, body)
        self.assertEqual(self.post(fake, 1, body)[0], 200)
        self.assertEqual(self.post(fake, 2, f"{stamp()}\nagain\n")[0], 200)
        self.assertEqual([r["seq"] for r in fake.records()], [1, 2])

    def test_clock_offset(self):
        fake = self.start("--clock-offset", "3600")
        status, answer = self.post(fake, 1, "")  # heartbeat
        self.assertEqual(status, 200)
        server_time = dt.datetime.strptime(answer.strip(), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=dt.timezone.utc)
        self.assertLess(abs(server_time.timestamp() - time.time() - 3600), 5)
        self.assertEqual(fake.records(), [])


if __name__ == "__main__":
    unittest.main(verbosity=2)
