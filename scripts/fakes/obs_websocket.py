#!/usr/bin/env python3
"""A fake of OBS Studio's obs-websocket 5 server, for Steno's end-to-end tests (stdlib only).

Imitates the WebSocket server built into OBS Studio 28+ (obs-websocket 5.x, RPC version 1),
as far as a live-captioning client sees it: the handshake, Hello/Identify/Identified,
Reidentify, Requests and their RequestResponses, the StreamStateChanged event, and what OBS
does with the text given to SendStreamCaption.

Faithful (checked against obs-websocket's sources, src/websocketserver/*.cpp,
src/requesthandler/*, src/utils/Crypto.cpp, and OBS's libobs/obs-output.c and
deps/libcaption):
  * RFC 6455 server side written by hand: the HTTP upgrade, Sec-WebSocket-Accept, client
    frames must be masked (an unmasked one is a protocol error, close 1002), fragmented
    messages with control frames between the fragments, ping -> pong, the close handshake
    (a client's close is echoed; a close the server starts waits for the client's).
  * Subprotocols: `obswebsocket.json` is selected when offered; with none offered the
    session is JSON over text frames and no Sec-WebSocket-Protocol is answered, as OBS does.
  * Hello: {"op":0,"d":{"obsStudioVersion","obsWebSocketVersion","rpcVersion":1,
    "authentication":{"challenge","salt"}}} -- `authentication` only with --password.
    As in OBS the salt is made once per server start and the challenge once per connection
    (each is base64 of 32 random bytes); --salt-per-connection makes a new salt each time.
  * Identify: the same checks in the same order as WebSocketServer_Protocol.cpp, with the
    same close codes and reason strings (authentication before rpcVersion; auth string =
    base64(sha256(base64(sha256(password + salt)) + challenge))).
  * Every close code, op code, request status code and comment string used here is the
    one obs-websocket uses.  JSON is written like nlohmann::json's dump(): keys sorted,
    no spaces, UTF-8 not escaped.
  * Requests: GetVersion, GetStreamStatus, StartStream, StopStream, ToggleStream,
    SendStreamCaption (plus RequestBatch, run serially).  Unknown types -> 204.
  * SendStreamCaption: captionText required (300 when missing, 401 when not a string,
    empty allowed), then 501 OutputNotRunning unless the stream output is active.
  * StreamStateChanged (eventIntent Outputs = 1 << 6) goes to identified sessions whose
    eventSubscriptions include Outputs (the default when Identify has none is All).
  * What OBS does with caption text (recorded as "kept" and "rows"): libobs keeps the
    first 128 bytes (CAPTION_LINE_BYTES) of the C string; libcaption's
    caption_frame_from_text wraps it into a 15 x 32 cell frame (whitespace, '\\n' and '\\r'
    rules of utf8_wrap_length); characters EIA-608 cannot show leave their cell empty, and
    sei_from_caption_frame stops a row at its first empty cell.  See obs_caption_rows().

Simplified / not imitated:
  * MessagePack: a client offering only `obswebsocket.msgpack` is refused with HTTP 400
    (OBS would speak MessagePack); if both are offered JSON is chosen even when msgpack
    comes first (OBS takes the first of the two in the client's order).
  * Only the requests above exist.  Stream start/stop complete after --start-delay /
    --stop-delay (default 0 s); the output statistics in GetStreamStatus are made up.
  * Requests are answered in order; OBS runs them on a thread pool.
  * No TLS, no compression extensions, no server-initiated pings.

Usage: obs_websocket.py [--port N] [--password P] [--streaming | --streaming-after S]
                        [--stop-after S] [--record FILE] ...   (see --help)
The first line on stdout is `listening PORT`.  SIGTERM/SIGINT close every session with
1001 "Server stopping." (as OBS does when its server stops) and exit 0.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import os
import random
import signal
import struct
import sys
import time

from obs_captions import CAPTION_LINE_BYTES, obs_caption_rows  # noqa: F401 (the fake's captions)
from ws_server import WS_GUID, PeerClosed, ProtocolError, RFC6455Close, WebSocket  # noqa: F401 (its connections)

# --------------------------------------------------------------------------------------
# obs-websocket protocol constants (src/websocketserver/types/*.h,
# src/requesthandler/types/RequestStatus.h, src/eventhandler/types/EventSubscription.h)
# --------------------------------------------------------------------------------------

RPC_VERSION = 1


class Op:
    HELLO = 0
    IDENTIFY = 1
    IDENTIFIED = 2
    REIDENTIFY = 3
    EVENT = 5
    REQUEST = 6
    REQUEST_RESPONSE = 7
    REQUEST_BATCH = 8
    REQUEST_BATCH_RESPONSE = 9


class Close(RFC6455Close):
    """WebSocketCloseCode (obs-websocket), beside the RFC 6455 codes."""

    UNKNOWN_REASON = 4000
    MESSAGE_DECODE_ERROR = 4002
    MISSING_DATA_FIELD = 4003
    INVALID_DATA_FIELD_TYPE = 4004
    INVALID_DATA_FIELD_VALUE = 4005
    UNKNOWN_OP_CODE = 4006
    NOT_IDENTIFIED = 4007
    ALREADY_IDENTIFIED = 4008
    AUTHENTICATION_FAILED = 4009
    UNSUPPORTED_RPC_VERSION = 4010
    SESSION_INVALIDATED = 4011
    UNSUPPORTED_FEATURE = 4012


class Status:
    """RequestStatus (obs-websocket)."""

    SUCCESS = 100
    MISSING_REQUEST_TYPE = 203
    UNKNOWN_REQUEST_TYPE = 204
    GENERIC_ERROR = 205
    UNSUPPORTED_REQUEST_BATCH_EXECUTION_TYPE = 206
    NOT_READY = 207
    MISSING_REQUEST_FIELD = 300
    MISSING_REQUEST_DATA = 301
    INVALID_REQUEST_FIELD = 400
    INVALID_REQUEST_FIELD_TYPE = 401
    REQUEST_FIELD_OUT_OF_RANGE = 402
    REQUEST_FIELD_EMPTY = 403
    OUTPUT_RUNNING = 500
    OUTPUT_NOT_RUNNING = 501


EVENT_SUB_OUTPUTS = 1 << 6
# EventSubscription::All = General | Config | ... | Ui | Canvases = bits 0..11.  It is the
# session's subscription until Identify/Reidentify says otherwise.
EVENT_SUB_ALL = (1 << 12) - 1

# ObsOutputState strings (src/utils/Obs.h)
OUTPUT_STARTING = "OBS_WEBSOCKET_OUTPUT_STARTING"
OUTPUT_STARTED = "OBS_WEBSOCKET_OUTPUT_STARTED"
OUTPUT_STOPPING = "OBS_WEBSOCKET_OUTPUT_STOPPING"
OUTPUT_STOPPED = "OBS_WEBSOCKET_OUTPUT_STOPPED"



def dump_json(obj):
    """Serialise like nlohmann::json::dump(): sorted keys (std::map), compact, raw UTF-8."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def log(msg):
    if not QUIET:
        print(f"[fake-obs] {msg}", file=sys.stderr, flush=True)


QUIET = False


# --------------------------------------------------------------------------------------
# Authentication (src/utils/Crypto.cpp)
# --------------------------------------------------------------------------------------


def generate_salt():
    """Utils::Crypto::GenerateSalt(): 32 random bytes (each bounded(255): 0..254), base64."""
    rng = random.SystemRandom()
    return base64.b64encode(bytes(rng.randrange(255) for _ in range(32))).decode()


def generate_secret(password, salt):
    """base64(sha256(password + salt)) -- the 'base64 secret'."""
    return base64.b64encode(hashlib.sha256((password + salt).encode("utf-8")).digest()).decode()


def expected_auth(secret, challenge):
    """base64(sha256(secret + challenge)) -- what Identify.authentication must equal."""
    return base64.b64encode(hashlib.sha256((secret + challenge).encode("utf-8")).digest()).decode()


# --------------------------------------------------------------------------------------
# The fake OBS
# --------------------------------------------------------------------------------------


class Session:
    """One client connection's obs-websocket session state (WebSocketSession)."""

    def __init__(self, ws, peer, challenge, secret):
        self.ws = ws
        self.peer = peer
        self.identified = False
        self.event_subscriptions = EVENT_SUB_ALL
        self.challenge = challenge
        self.secret = secret


class Outcome:
    """What ProcessMessage decided: send `result` and/or close with (code, reason)."""

    def __init__(self, result=None, close=None):
        self.result = result
        self.close = close


def _is_unsigned(v):
    """nlohmann is_number_unsigned(): a non-negative integer literal (not bool, not 1.0)."""
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _timecode(ms):
    """Utils::Obs::StringHelper::DurationToTimecode: HH:MM:SS.mmm."""
    secs = ms // 1000
    return "%02d:%02d:%02d.%03d" % (secs // 3600, (secs // 60) % 60, secs % 60, ms % 1000)


class FakeObs:
    def __init__(self, args):
        self.args = args
        self.sessions = set()
        self.salt = generate_salt()
        self.output_state = OUTPUT_STOPPED
        self.stream_started_at = None
        self.record_file = open(args.record, "a", encoding="utf-8") if args.record else None
        self.handlers = {
            "GetVersion": self.req_get_version,
            "GetStreamStatus": self.req_get_stream_status,
            "StartStream": self.req_start_stream,
            "StopStream": self.req_stop_stream,
            "ToggleStream": self.req_toggle_stream,
            "SendStreamCaption": self.req_send_stream_caption,
        }

    # ---- the stream output ------------------------------------------------------------

    @property
    def streaming_active(self):
        """obs_frontend_streaming_active(): the output is active from STARTED until STOPPED."""
        return self.output_state in (OUTPUT_STARTED, OUTPUT_STOPPING)

    def start_streaming(self):
        if self.output_state != OUTPUT_STOPPED:
            return
        self._set_output_state(OUTPUT_STARTING)
        asyncio.get_running_loop().call_later(self.args.start_delay, self._finish_start)

    def _finish_start(self):
        if self.output_state == OUTPUT_STARTING:
            self.stream_started_at = time.monotonic()
            self._set_output_state(OUTPUT_STARTED)

    def stop_streaming(self):
        if self.output_state != OUTPUT_STARTED:
            return
        self._set_output_state(OUTPUT_STOPPING)
        asyncio.get_running_loop().call_later(self.args.stop_delay, self._finish_stop)

    def _finish_stop(self):
        if self.output_state == OUTPUT_STOPPING:
            self.stream_started_at = None
            self._set_output_state(OUTPUT_STOPPED)

    def _set_output_state(self, state):
        self.output_state = state
        log(f"stream output: {state}")
        self.broadcast_event(
            EVENT_SUB_OUTPUTS,
            "StreamStateChanged",
            {"outputActive": state == OUTPUT_STARTED, "outputState": state},
        )

    def broadcast_event(self, intent, event_type, event_data):
        """WebSocketServer::BroadcastEvent: to identified sessions subscribed to `intent`."""
        message = dump_json({"op": Op.EVENT, "d": {"eventType": event_type, "eventIntent": intent,
                                                   "eventData": event_data}})
        for session in list(self.sessions):
            if session.identified and session.event_subscriptions & intent:
                session.ws.send_text(message)

    # ---- recording ----------------------------------------------------------------------

    def record(self, obj):
        if self.record_file:
            self.record_file.write(json.dumps(obj, ensure_ascii=False) + "\n")
            self.record_file.flush()

    # ---- connections --------------------------------------------------------------------

    async def handle_connection(self, reader, writer):
        peer = writer.get_extra_info("peername")
        ws = WebSocket(reader, writer)
        try:
            ok = await asyncio.wait_for(self.handshake(reader, writer), 10.0)
        except (asyncio.TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
                ConnectionError, ValueError):
            ok = False
        if not ok:
            await ws.abort()
            return

        challenge = generate_salt()
        salt = generate_salt() if self.args.salt_per_connection else self.salt
        secret = generate_secret(self.args.password, salt) if self.args.password is not None else None
        session = Session(ws, peer, challenge, secret)
        self.sessions.add(session)
        log(f"client {peer} connected")

        hello = {"obsStudioVersion": self.args.obs_version,
                 "obsWebSocketVersion": self.args.websocket_version,
                 "rpcVersion": RPC_VERSION}
        if secret is not None:
            hello["authentication"] = {"challenge": challenge, "salt": salt}
        ws.send_text(dump_json({"op": Op.HELLO, "d": hello}))

        try:
            while True:
                opcode, payload = await ws.read_message()
                outcome = self.on_message(session, opcode, payload)
                if outcome.result is not None:
                    ws.send_text(dump_json(outcome.result))
                if outcome.close is not None:
                    code, reason = outcome.close
                    log(f"closing {peer}: {code} {reason}")
                    await ws.close(code, reason)
                    break
                await writer.drain()
        except PeerClosed as e:
            log(f"client {peer} closed: {e.code} {e.reason!r}")
            await ws.echo_close(e.code)
        except ProtocolError as e:
            log(f"protocol error from {peer}: {e.code} {e.reason}")
            await ws.close(e.code, e.reason)
        except (asyncio.IncompleteReadError, ConnectionError):
            log(f"client {peer} dropped the connection")
            await ws.abort()
        finally:
            self.sessions.discard(session)

    async def handshake(self, reader, writer):
        """The HTTP/1.1 upgrade (RFC 6455 4.2).  Returns True once 101 has been sent."""
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                name, _, value = line.partition(":")
                headers.setdefault(name.strip().lower(), []).append(value.strip())

        def tokens(name):
            return [t.strip().lower() for v in headers.get(name, []) for t in v.split(",") if t.strip()]

        def refuse(status, body, extra=()):
            data = body.encode()
            response = [f"HTTP/1.1 {status}", "Content-Type: text/plain", f"Content-Length: {len(data)}",
                        "Connection: close", *extra, "", ""]
            writer.write("\r\n".join(response).encode() + data)
            log(f"handshake refused: {status}: {body}")
            return False

        if len(parts) != 3 or parts[0] != "GET" or parts[2] != "HTTP/1.1":
            return refuse("400 Bad Request", "expected a GET ... HTTP/1.1 WebSocket upgrade request")
        if "websocket" not in tokens("upgrade") or "upgrade" not in tokens("connection"):
            return refuse("426 Upgrade Required", "this is a WebSocket server (obs-websocket)",
                          ["Upgrade: websocket", "Connection: Upgrade"])
        if headers.get("sec-websocket-version", [""])[0] != "13":
            return refuse("426 Upgrade Required", "only WebSocket version 13 is supported",
                          ["Sec-WebSocket-Version: 13"])
        key = headers.get("sec-websocket-key", [""])[0]
        try:
            if len(base64.b64decode(key, validate=True)) != 16:
                raise ValueError
        except ValueError:
            return refuse("400 Bad Request", "missing or malformed Sec-WebSocket-Key")

        offered = [t.strip() for v in headers.get("sec-websocket-protocol", []) for t in v.split(",") if t.strip()]
        selected = None
        if "obswebsocket.json" in offered:
            selected = "obswebsocket.json"
        elif "obswebsocket.msgpack" in offered:
            return refuse("400 Bad Request",
                          "this fake obs-websocket speaks only obswebsocket.json; "
                          "offer obswebsocket.json (or no subprotocol)")

        accept = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
        response = ["HTTP/1.1 101 Switching Protocols", "Connection: Upgrade",
                    f"Sec-WebSocket-Accept: {accept}"]
        if selected:
            response.append(f"Sec-WebSocket-Protocol: {selected}")
        response += ["Server: WebSocket++/0.8.2 (fake obs-websocket)", "Upgrade: websocket", "", ""]
        writer.write("\r\n".join(response).encode())
        await writer.drain()
        return True

    # ---- obs-websocket message processing (WebSocketServer::onMessage / ProcessMessage) --

    def on_message(self, session, opcode, payload):
        if opcode != 0x1:
            return Outcome(close=(Close.MESSAGE_DECODE_ERROR,
                                  "Your session encoding is set to Json, but a binary message was received."))

        def no_constants(name):
            raise ValueError(f"invalid literal {name}")

        try:
            message = json.loads(payload.decode("utf-8"), parse_constant=no_constants)
        except ValueError as e:
            return Outcome(close=(Close.MESSAGE_DECODE_ERROR, f"Unable to decode Json: {e}"))

        if not isinstance(message, dict):
            return Outcome(close=(Close.MESSAGE_DECODE_ERROR, "You sent a non-object payload."))
        if not session.identified and "request-type" in message:
            return Outcome(close=(Close.UNSUPPORTED_RPC_VERSION,
                                  "You appear to be attempting to connect with the pre-5.0.0 plugin protocol. "
                                  "Check to make sure your client is updated."))
        if "op" not in message:
            return Outcome(close=(Close.UNKNOWN_OP_CODE, "Your request is missing an `op`."))
        if not _is_number(message["op"]):
            return Outcome(close=(Close.UNKNOWN_OP_CODE, "Your `op` is not a number."))
        op = int(message["op"]) & 0xFF  # converted to uint8_t WebSocketOpCode
        return self.process_message(session, op, message.get("d"))

    def process_message(self, session, op, d):
        if not isinstance(d, dict):
            if d is None:
                return Outcome(close=(Close.MISSING_DATA_FIELD, "Your payload is missing data (`d`)."))
            return Outcome(close=(Close.INVALID_DATA_FIELD_TYPE, "Your payload's data (`d`) is not an object."))

        if not session.identified and op != Op.IDENTIFY:
            return Outcome(close=(Close.NOT_IDENTIFIED,
                                  "You attempted to send a non-Identify message while not identified."))

        if op == Op.IDENTIFY:
            return self.identify(session, d)
        if op == Op.REIDENTIFY:
            close = self.set_session_parameters(session, d)
            if close:
                return Outcome(close=close)
            return Outcome(result={"op": Op.IDENTIFIED, "d": {"negotiatedRpcVersion": RPC_VERSION}})
        if op == Op.REQUEST:
            return self.request(d)
        if op == Op.REQUEST_BATCH:
            return self.request_batch(d)
        return Outcome(close=(Close.UNKNOWN_OP_CODE, f"Unknown OpCode: {op}"))

    def identify(self, session, d):
        if session.identified:
            return Outcome(close=(Close.ALREADY_IDENTIFIED, "You are already Identified with the obs-websocket server."))
        if session.secret is not None:
            if "authentication" not in d:
                return Outcome(close=(Close.AUTHENTICATION_FAILED,
                                      "Your payload's data is missing an `authentication` string, "
                                      "however authentication is required."))
            if not isinstance(d["authentication"], str):
                return Outcome(close=(Close.AUTHENTICATION_FAILED, "Your `authentication` field is not a string."))
            if d["authentication"] != expected_auth(session.secret, session.challenge):
                return Outcome(close=(Close.AUTHENTICATION_FAILED, "Authentication failed."))
        if "rpcVersion" not in d:
            return Outcome(close=(Close.MISSING_DATA_FIELD, "Your payload's data is missing an `rpcVersion`."))
        if not _is_unsigned(d["rpcVersion"]):
            return Outcome(close=(Close.INVALID_DATA_FIELD_TYPE, "Your `rpcVersion` is not an unsigned number."))
        if d["rpcVersion"] & 0xFF != RPC_VERSION:  # stored as uint8_t
            return Outcome(close=(Close.UNSUPPORTED_RPC_VERSION,
                                  "Your requested RPC version is not supported by this server."))
        close = self.set_session_parameters(session, d)
        if close:
            return Outcome(close=close)
        session.identified = True
        log(f"client {session.peer} identified (eventSubscriptions {session.event_subscriptions})")
        return Outcome(result={"op": Op.IDENTIFIED, "d": {"negotiatedRpcVersion": RPC_VERSION}})

    @staticmethod
    def set_session_parameters(session, d):
        if "eventSubscriptions" in d:
            if not _is_unsigned(d["eventSubscriptions"]):
                return (Close.INVALID_DATA_FIELD_TYPE, "Your `eventSubscriptions` is not an unsigned number.")
            session.event_subscriptions = d["eventSubscriptions"]
        return None

    def request(self, d):
        if "requestId" not in d:
            return Outcome(close=(Close.MISSING_DATA_FIELD, "Your payload data is missing a `requestId`."))
        if "requestType" not in d:
            return Outcome(close=(Close.MISSING_DATA_FIELD, "Your payload's data is missing an `requestType`."))
        if not isinstance(d["requestType"], str):
            return Outcome(close=(Close.INVALID_DATA_FIELD_TYPE, "Your `requestType` is not a string."))
        code, comment, data = self.process_request(d["requestType"], d.get("requestData"))
        status = {"result": code == Status.SUCCESS, "code": code}
        if comment:
            status["comment"] = comment
        result = {"requestType": d["requestType"], "requestId": d["requestId"], "requestStatus": status}
        if isinstance(data, dict):
            result["responseData"] = data
        return Outcome(result={"op": Op.REQUEST_RESPONSE, "d": result})

    def request_batch(self, d):
        if "requestId" not in d:
            return Outcome(close=(Close.MISSING_DATA_FIELD, "Your payload data is missing a `requestId`."))
        if d.get("executionType") is not None:
            if not _is_unsigned(d["executionType"]):
                return Outcome(close=(Close.INVALID_DATA_FIELD_TYPE, "Your `executionType` is not a number."))
            et = ((d["executionType"] & 0xFF) ^ 0x80) - 0x80  # int8_t
            if not (0 <= et <= 2):
                return Outcome(close=(Close.INVALID_DATA_FIELD_VALUE, "Your `executionType` has an invalid value."))
        halt = False
        if d.get("haltOnFailure") is not None:
            if not isinstance(d["haltOnFailure"], bool):
                return Outcome(close=(Close.INVALID_DATA_FIELD_TYPE, "Your `haltOnFailure` is not a boolean."))
            halt = d["haltOnFailure"]
        if "requests" not in d:
            return Outcome(close=(Close.MISSING_DATA_FIELD, "Your payload data is missing a `requests`."))
        if not isinstance(d["requests"], list):
            return Outcome(close=(Close.INVALID_DATA_FIELD_TYPE, "Your `requests` is not an array."))
        results = []
        for req in d["requests"]:
            req = req if isinstance(req, dict) else {}
            rtype = req.get("requestType") if isinstance(req.get("requestType"), str) else ""
            code, comment, data = self.process_request(rtype, req.get("requestData"))
            status = {"result": code == Status.SUCCESS, "code": code}
            if comment:
                status["comment"] = comment
            item = {"requestType": rtype, "requestStatus": status}
            if req.get("requestId") is not None:
                item["requestId"] = req["requestId"]
            if isinstance(data, dict):
                item["responseData"] = data
            results.append(item)
            if halt and code != Status.SUCCESS:
                break
        return Outcome(result={"op": Op.REQUEST_BATCH_RESPONSE, "d": {"requestId": d["requestId"], "results": results}})

    # ---- requests (RequestHandler::ProcessRequest and the handlers) ---------------------

    def process_request(self, request_type, request_data):
        """Returns (status code, comment or None, responseData dict or None)."""
        if request_type == "":
            return Status.MISSING_REQUEST_TYPE, "Your request's `requestType` may not be empty.", None
        handler = self.handlers.get(request_type)
        if handler is None:
            return Status.UNKNOWN_REQUEST_TYPE, "Your request type is not valid.", None
        has_data = isinstance(request_data, dict)
        return handler(request_data if has_data else {}, has_data)

    def req_get_version(self, data, has_data):
        return Status.SUCCESS, None, {
            "obsVersion": self.args.obs_version,
            "obsWebSocketVersion": self.args.websocket_version,
            "rpcVersion": RPC_VERSION,
            "availableRequests": sorted(self.handlers),
            "supportedImageFormats": ["bmp", "jpeg", "jpg", "png"],
            "platform": "debian",
            "platformDescription": "Debian GNU/Linux 12 (bookworm) [fake obs-websocket]",
        }

    def req_get_stream_status(self, data, has_data):
        ms = 0
        if self.streaming_active and self.stream_started_at is not None:
            ms = int((time.monotonic() - self.stream_started_at) * 1000)
        return Status.SUCCESS, None, {
            "outputActive": self.streaming_active,
            "outputReconnecting": False,
            "outputTimecode": _timecode(ms),
            "outputDuration": ms,
            "outputCongestion": 0.0,
            "outputBytes": ms * 750,  # as if 6 Mbit/s
            "outputSkippedFrames": 0,
            "outputTotalFrames": ms * 30 // 1000,
        }

    def req_start_stream(self, data, has_data):
        if self.streaming_active:
            return Status.OUTPUT_RUNNING, None, None
        self.start_streaming()  # no-op while already STARTING, as obs_frontend_streaming_start
        return Status.SUCCESS, None, None

    def req_stop_stream(self, data, has_data):
        if not self.streaming_active:
            return Status.OUTPUT_NOT_RUNNING, None, None
        self.stop_streaming()
        return Status.SUCCESS, None, None

    def req_toggle_stream(self, data, has_data):
        if self.streaming_active:
            self.stop_streaming()
            return Status.SUCCESS, None, {"outputActive": False}
        self.start_streaming()
        return Status.SUCCESS, None, {"outputActive": True}

    def req_send_stream_caption(self, data, has_data):
        # Request::ValidateString("captionText", ..., allowEmpty = true)
        if not has_data:
            return Status.MISSING_REQUEST_DATA, "Your request data is missing or invalid (non-object)", None
        if data.get("captionText") is None:
            return Status.MISSING_REQUEST_FIELD, "Your request is missing the `captionText` field.", None
        text = data["captionText"]
        if not isinstance(text, str):
            return Status.INVALID_REQUEST_FIELD_TYPE, "The field value of `captionText` must be a string.", None
        if not self.streaming_active:
            self.record({"t": time.time(), "rejected": text})
            log(f"caption rejected (not streaming): {text!r}")
            return Status.OUTPUT_NOT_RUNNING, None, None
        kept, rows = obs_caption_rows(text)
        self.record({"t": time.time(), "text": text, "kept": kept, "rows": rows})
        log(f"caption: {text!r} -> rows {rows!r}")
        return Status.SUCCESS, None, None

    # ---- lifecycle ------------------------------------------------------------------------

    async def shutdown(self):
        """WebSocketServer::Stop(): close every session with 1001 "Server stopping."."""
        await asyncio.gather(*(s.ws.close(Close.GOING_AWAY, "Server stopping.", wait_for_ack=False)
                               for s in list(self.sessions)), return_exceptions=True)
        if self.record_file:
            self.record_file.close()


async def main_async(args):
    obs = FakeObs(args)
    server = await asyncio.start_server(obs.handle_connection, args.host, args.port)
    port = server.sockets[0].getsockname()[1]
    print(f"listening {port}", flush=True)
    log(f"fake obs-websocket on ws://{args.host}:{port} "
        f"(password {'set' if args.password is not None else 'off'})")

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    if args.streaming:
        obs.start_streaming()
    elif args.streaming_after is not None:
        loop.call_later(args.streaming_after, obs.start_streaming)
    if args.stop_after is not None:
        loop.call_later(args.stop_after, obs.stop_streaming)

    await stop.wait()
    log("stopping")
    server.close()
    await obs.shutdown()
    await server.wait_closed()


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="Fake OBS Studio obs-websocket 5 server (JSON only).")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=4455, help="TCP port; 0 picks a free one (default 4455)")
    p.add_argument("--password", default=None, help="require authentication with this password")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--streaming", action="store_true", help="the stream output is active from the start")
    g.add_argument("--streaming-after", type=float, metavar="SECONDS",
                   help="start the stream output this many seconds after launch")
    p.add_argument("--stop-after", type=float, metavar="SECONDS",
                   help="stop the stream output this many seconds after launch")
    p.add_argument("--start-delay", type=float, default=0.0, metavar="SECONDS",
                   help="time between StreamStateChanged STARTING and STARTED (default 0)")
    p.add_argument("--stop-delay", type=float, default=0.0, metavar="SECONDS",
                   help="time between StreamStateChanged STOPPING and STOPPED (default 0)")
    p.add_argument("--record", metavar="FILE", help="append one JSON line per caption (accepted or rejected)")
    p.add_argument("--salt-per-connection", action="store_true",
                   help="a new auth salt for every connection (OBS makes one per server start)")
    p.add_argument("--obs-version", default="31.0.0", help="obsStudioVersion/obsVersion to report")
    p.add_argument("--websocket-version", default="5.5.4", help="obsWebSocketVersion to report")
    p.add_argument("--quiet", action="store_true", help="no log lines on stderr")
    return p.parse_args(argv)


def main(argv=None):
    global QUIET
    args = parse_args(argv)
    QUIET = args.quiet
    asyncio.run(main_async(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
