#!/usr/bin/env python3
"""A small obs-websocket 5 client (standard library only) for the broadcast check.

Connects to OBS's obs-websocket server (RFC 6455, hand-written: handshake, masked frames),
identifies (Hello op 0 -> Identify op 1 with the auth string -> Identified op 2) and sends
Requests (op 6), printing each RequestResponse (op 7) as one JSON line on stdout.

  obs_send_captions.py [--url ws://127.0.0.1:4455] [--password P] COMMAND ...
    captions [--wait-active S] [--interval S] [--file F] [TEXT ...]
        wait until the stream output is active (GetStreamStatus, up to S seconds), then send
        each TEXT (or each line of F; "\\n" in a line is a line break) with SendStreamCaption,
        INTERVAL seconds apart
    wait-active [--timeout S]       wait until GetStreamStatus says outputActive
    stop-stream [--timeout S]       StopStream, then wait until outputActive is false
    request TYPE [JSON]             send one request, print its response

--url and --password default to $OBS_URL and $OBS_PASSWORD.
Exit status: 0 ok; 1 a request failed or a wait timed out; 2 no connection, or OBS closed it
(the close code and reason are printed on stderr, e.g. 4009 "Authentication failed.").
"""

import argparse
import base64
import hashlib
import json
import os
import socket
import struct
import sys
import time
import urllib.parse


class Closed(Exception):
    """The server closed the connection (code, reason)."""

    def __init__(self, code, reason):
        super().__init__(f"closed by OBS: code {code} reason {reason!r}")
        self.code = code
        self.reason = reason


class WebSocket:
    """A minimal RFC 6455 client: text frames out (masked), text/close/ping frames in."""

    def __init__(self, url, protocol="obswebsocket.json", timeout=10.0):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "ws":
            raise ValueError(f"only ws:// URLs are supported, not {url!r}")
        host = parts.hostname or "127.0.0.1"
        port = parts.port or 80
        path = parts.path or "/"
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\n"
            f"Host: {host}:{port}\r\n"
            "Upgrade: websocket\r\n"
            "Connection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\n"
            "Sec-WebSocket-Version: 13\r\n"
            f"Sec-WebSocket-Protocol: {protocol}\r\n"
            "\r\n"
        )
        self.sock.sendall(request.encode())
        while b"\r\n\r\n" not in self.buf:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise ConnectionError("connection closed during the WebSocket handshake")
            self.buf += chunk
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        if not lines[0].startswith("HTTP/1.1 101"):
            raise ConnectionError(f"handshake refused: {lines[0]}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        accept = base64.b64encode(
            hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
        ).decode()
        if headers.get("sec-websocket-accept") != accept:
            raise ConnectionError("handshake: bad Sec-WebSocket-Accept")

    def _read(self, n):
        while len(self.buf) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def _send_frame(self, opcode, payload):
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 65536:
            header += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self.sock.sendall(header + mask + masked)

    def send_text(self, text):
        self._send_frame(0x1, text.encode("utf-8"))

    def recv_text(self):
        """Returns the next text message; answers pings; raises Closed on a close frame."""
        message = b""
        while True:
            b0, b1 = self._read(2)
            fin, opcode = b0 & 0x80, b0 & 0x0F
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack("!H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            payload = self._read(n)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x8:
                code = struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None
                reason = payload[2:].decode("utf-8", "replace")
                try:
                    self._send_frame(0x8, payload[:2])
                except OSError:
                    pass
                raise Closed(code, reason)
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            message += payload
            if fin:
                return message.decode("utf-8")

    def close(self):
        try:
            self._send_frame(0x8, struct.pack("!H", 1000))
            self.sock.settimeout(2)
            while True:
                self.recv_text()
        except (Closed, OSError, ConnectionError):
            pass
        finally:
            self.sock.close()


def auth_string(password, salt, challenge):
    secret = base64.b64encode(hashlib.sha256((password + salt).encode()).digest()).decode()
    return base64.b64encode(hashlib.sha256((secret + challenge).encode()).digest()).decode()


class OBS:
    def __init__(self, url, password):
        self.ws = WebSocket(url)
        hello = json.loads(self.ws.recv_text())
        if hello.get("op") != 0:
            raise ConnectionError(f"expected Hello (op 0), got {hello}")
        data = hello["d"]
        self.version = data.get("obsWebSocketVersion")
        identify = {"rpcVersion": 1, "eventSubscriptions": 0}
        auth = data.get("authentication")
        if auth:
            if password is None:
                raise ConnectionError("OBS asks for a password; give --password or OBS_PASSWORD")
            identify["authentication"] = auth_string(password, auth["salt"], auth["challenge"])
        self.ws.send_text(json.dumps({"op": 1, "d": identify}))
        while True:
            msg = json.loads(self.ws.recv_text())
            if msg.get("op") == 2:
                self.rpc = msg["d"].get("negotiatedRpcVersion")
                break
        self.next_id = 0

    def request(self, request_type, data=None):
        self.next_id += 1
        request_id = f"steno-{self.next_id}"
        d = {"requestType": request_type, "requestId": request_id}
        if data is not None:
            d["requestData"] = data
        self.ws.send_text(json.dumps({"op": 6, "d": d}))
        while True:
            msg = json.loads(self.ws.recv_text())
            if msg.get("op") == 7 and msg["d"].get("requestId") == request_id:
                return msg["d"]

    def close(self):
        self.ws.close()


def log(response, **extra):
    status = response.get("requestStatus", {})
    line = {
        "time": round(time.time(), 3),
        "requestType": response.get("requestType"),
        "result": status.get("result"),
        "code": status.get("code"),
    }
    if "comment" in status:
        line["comment"] = status["comment"]
    if "responseData" in response:
        line["responseData"] = response["responseData"]
    line.update(extra)
    print(json.dumps(line, ensure_ascii=False), flush=True)


def wait_output(obs, active, timeout):
    deadline = time.monotonic() + timeout
    while True:
        response = obs.request("GetStreamStatus")
        if response["requestStatus"]["result"] and response["responseData"]["outputActive"] == active:
            log(response)
            return True
        if time.monotonic() >= deadline:
            log(response, timedOut=True)
            return False
        time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("OBS_URL", "ws://127.0.0.1:4455"))
    parser.add_argument("--password", default=os.environ.get("OBS_PASSWORD"))
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("captions")
    p.add_argument("--wait-active", type=float, default=60.0, metavar="S")
    p.add_argument("--interval", type=float, default=3.0, metavar="S")
    p.add_argument("--file", metavar="F")
    p.add_argument("text", nargs="*")
    p = sub.add_parser("wait-active")
    p.add_argument("--timeout", type=float, default=60.0)
    p = sub.add_parser("stop-stream")
    p.add_argument("--timeout", type=float, default=20.0)
    p = sub.add_parser("request")
    p.add_argument("type")
    p.add_argument("data", nargs="?")
    args = parser.parse_args()

    try:
        obs = OBS(args.url, args.password)
    except Closed as e:
        print(f"obs_send_captions: OBS closed the connection: code {e.code}, reason {e.reason!r}", file=sys.stderr)
        return 2
    except (OSError, ConnectionError, ValueError) as e:
        print(f"obs_send_captions: cannot connect to {args.url}: {e}", file=sys.stderr)
        return 2
    ok = True
    try:
        if args.command == "captions":
            texts = list(args.text)
            if args.file:
                with open(args.file, encoding="utf-8") as f:
                    texts += [line.rstrip("\n").replace("\\n", "\n") for line in f if line.strip()]
            if not wait_output(obs, True, args.wait_active):
                return 1
            for i, text in enumerate(texts):
                if i:
                    time.sleep(args.interval)
                response = obs.request("SendStreamCaption", {"captionText": text})
                log(response, captionText=text)
                ok = ok and response["requestStatus"]["result"]
        elif args.command == "wait-active":
            ok = wait_output(obs, True, args.timeout)
        elif args.command == "stop-stream":
            response = obs.request("StopStream")
            log(response)
            ok = response["requestStatus"]["result"] and wait_output(obs, False, args.timeout)
        elif args.command == "request":
            data = json.loads(args.data) if args.data else None
            response = obs.request(args.type, data)
            log(response)
            ok = response["requestStatus"]["result"]
    except Closed as e:
        print(f"obs_send_captions: OBS closed the connection: code {e.code}, reason {e.reason!r}", file=sys.stderr)
        return 2
    except (OSError, ConnectionError) as e:
        print(f"obs_send_captions: connection lost: {e}", file=sys.stderr)
        return 2
    obs.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
