"""The server side of RFC 6455 written by hand, as obs-websocket's websocketpp speaks it, for the
fake of obs-websocket 5 (obs_websocket.py): client frames must be masked, fragmented messages
with control frames between their fragments, ping -> pong, the close handshake."""

import asyncio
import struct

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE_BYTES = 32_000_000  # websocketpp's default max_message_size
CLOSE_ACK_TIMEOUT = 2.0  # how long a server-started close waits for the client's close


class RFC6455Close:
    """The RFC 6455 close codes this server uses."""

    NORMAL = 1000
    GOING_AWAY = 1001
    PROTOCOL_ERROR = 1002
    INVALID_PAYLOAD = 1007
    MESSAGE_TOO_BIG = 1009


Close = RFC6455Close

# --------------------------------------------------------------------------------------
# RFC 6455 framing
# --------------------------------------------------------------------------------------


class ProtocolError(Exception):
    """A WebSocket-level error: the server closes with `code` (1002, 1007, 1009)."""

    def __init__(self, code, reason):
        super().__init__(reason)
        self.code = code
        self.reason = reason


class PeerClosed(Exception):
    """The client sent a close frame (code None when it carried no status)."""

    def __init__(self, code, reason):
        super().__init__(f"peer closed {code} {reason!r}")
        self.code = code
        self.reason = reason


def _unmask(data, key):
    n = len(data)
    if n == 0:
        return data
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(n, "big")


def _frame(opcode, payload):
    """A server frame: FIN set, never masked (RFC 6455 5.1)."""
    n = len(payload)
    if n < 126:
        header = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        header = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        header = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return header + payload


def _close_payload(code, reason):
    data = reason.encode("utf-8")
    while len(data) > 123:  # a control frame payload is at most 125 bytes
        reason = reason[:-1]
        data = reason.encode("utf-8")
    return struct.pack("!H", code) + data


def _valid_close_code(code):
    return 1000 <= code <= 1003 or 1007 <= code <= 1014 or 3000 <= code <= 4999


class WebSocket:
    """The server side of one RFC 6455 connection over asyncio streams."""

    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.close_sent = False

    async def read_frame(self):
        b0, b1 = await self.reader.readexactly(2)
        fin, rsv, opcode = bool(b0 & 0x80), b0 & 0x70, b0 & 0x0F
        masked, length = bool(b1 & 0x80), b1 & 0x7F
        if rsv:
            raise ProtocolError(Close.PROTOCOL_ERROR, "RSV bits set but no extension was negotiated")
        if opcode not in (0x0, 0x1, 0x2, 0x8, 0x9, 0xA):
            raise ProtocolError(Close.PROTOCOL_ERROR, f"unknown frame opcode {opcode}")
        if length == 126:
            (length,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif length == 127:
            (length,) = struct.unpack("!Q", await self.reader.readexactly(8))
            if length >> 63:
                raise ProtocolError(Close.PROTOCOL_ERROR, "frame length has its top bit set")
        if opcode >= 0x8 and (not fin or length > 125):
            raise ProtocolError(Close.PROTOCOL_ERROR, "control frames must be unfragmented, <= 125 bytes")
        if not masked:
            raise ProtocolError(Close.PROTOCOL_ERROR, "client frames must be masked")
        if length > MAX_MESSAGE_BYTES:
            raise ProtocolError(Close.MESSAGE_TOO_BIG, "message too big")
        key = await self.reader.readexactly(4)
        payload = _unmask(await self.reader.readexactly(length), key)
        return fin, opcode, payload

    async def read_message(self):
        """The next complete data message as (opcode, payload).

        Answers pings, ignores pongs, reassembles fragments (control frames may come between
        them), checks text is UTF-8, raises PeerClosed on a (valid) close frame.
        """
        msg_opcode, parts, total = None, [], 0
        while True:
            fin, opcode, payload = await self.read_frame()
            if opcode == 0x9:
                self.send(0xA, payload)
                continue
            if opcode == 0xA:
                continue
            if opcode == 0x8:
                raise self._parse_close(payload)
            if opcode == 0x0:
                if msg_opcode is None:
                    raise ProtocolError(Close.PROTOCOL_ERROR, "continuation frame with no message to continue")
            else:
                if msg_opcode is not None:
                    raise ProtocolError(Close.PROTOCOL_ERROR, "new data frame inside a fragmented message")
                msg_opcode = opcode
            parts.append(payload)
            total += len(payload)
            if total > MAX_MESSAGE_BYTES:
                raise ProtocolError(Close.MESSAGE_TOO_BIG, "message too big")
            if fin:
                data = b"".join(parts)
                if msg_opcode == 0x1:
                    try:
                        data.decode("utf-8")
                    except UnicodeDecodeError:
                        raise ProtocolError(Close.INVALID_PAYLOAD, "text message is not valid UTF-8")
                return msg_opcode, data

    @staticmethod
    def _parse_close(payload):
        if not payload:
            return PeerClosed(None, "")
        if len(payload) == 1:
            return ProtocolError(Close.PROTOCOL_ERROR, "close frame with a 1-byte payload")
        (code,) = struct.unpack("!H", payload[:2])
        if not _valid_close_code(code):
            return ProtocolError(Close.PROTOCOL_ERROR, f"invalid close code {code}")
        try:
            reason = payload[2:].decode("utf-8")
        except UnicodeDecodeError:
            return ProtocolError(Close.INVALID_PAYLOAD, "close reason is not valid UTF-8")
        return PeerClosed(code, reason)

    def send(self, opcode, payload):
        if self.close_sent or self.writer.is_closing():
            return
        self.writer.write(_frame(opcode, payload))  # one write() per frame: never interleaved

    def send_text(self, text):
        self.send(0x1, text.encode("utf-8"))

    async def close(self, code, reason, wait_for_ack=True):
        """Start (or finish) the close handshake, then drop the TCP connection."""
        if not self.close_sent and not self.writer.is_closing():
            self.writer.write(_frame(0x8, _close_payload(code, reason)))
            self.close_sent = True
            if wait_for_ack:
                try:
                    await asyncio.wait_for(self._await_close_frame(), CLOSE_ACK_TIMEOUT)
                except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError, ProtocolError):
                    pass
        self.close_sent = True
        await self.abort()

    async def _await_close_frame(self):
        while True:  # after our close, data frames are discarded (RFC 6455 5.5.1)
            _, opcode, _ = await self.read_frame()
            if opcode == 0x8:
                return

    async def echo_close(self, code):
        """Answer a client's close frame (echoing its status code) and drop the connection."""
        if not self.close_sent and not self.writer.is_closing():
            payload = b"" if code is None else struct.pack("!H", code)
            self.writer.write(_frame(0x8, payload))
            self.close_sent = True
        await self.abort()

    async def abort(self):
        try:
            await self.writer.drain()
        except (ConnectionError, RuntimeError):
            pass
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, RuntimeError):
            pass


