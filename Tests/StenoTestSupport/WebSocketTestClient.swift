import Foundation

/// An RFC 6455 WebSocket client on raw sockets, for tests.
///
/// ```swift
/// let ws = try WebSocketTestClient.connect(port: port, path: "/v1/stream",
///                                          headers: [("Authorization", "Bearer t")])
/// try ws.sendText(#"{"type":"start"}"#)
/// let reply = try ws.receive()            // .text / .binary / .close(code, reason) / .pong
/// try ws.sendBinary(pcm, fragmentSize: 4096)
/// let (messages, close) = try ws.close(code: 1000)
/// ```
///
/// A refused handshake throws `TestClientError.refused(response)` with the HTTP
/// status, headers and body (or use `attempt` to get it as a value). Pings from the
/// server are answered automatically. Every read and write has a deadline.
public final class WebSocketTestClient {
    public enum Message: Equatable, CustomStringConvertible {
        case text(String)
        case binary([UInt8])
        /// A close frame: its status code (nil when the frame had none) and reason.
        case close(code: UInt16?, reason: String)
        case pong([UInt8])

        public var description: String {
            switch self {
            case .text(let s): "text(\(s.count > 80 ? String(s.prefix(80)) + "…" : s))"
            case .binary(let b): "binary(\(b.count) bytes)"
            case .close(let c, let r): "close(\(c.map(String.init) ?? "none"), \(r))"
            case .pong(let p): "pong(\(p.count) bytes)"
            }
        }
    }

    public enum Opcode: UInt8 {
        case continuation = 0, text = 1, binary = 2, close = 8, ping = 9, pong = 10
    }

    public enum Outcome {
        case upgraded(WebSocketTestClient)
        case refused(TestHTTPResponse)
    }

    public let stream: TestStream
    /// The 101 response.
    public let handshake: TestHTTPResponse
    /// Answer pings with pongs inside `receive` (on by default).
    public var autoPong = true
    /// Answer the server's close frame with a close frame (on by default).
    public var autoCloseReply = true
    /// Set once a close frame was received.
    private(set) var receivedClose: Message?
    private(set) var sentClose = false

    private init(stream: TestStream, handshake: TestHTTPResponse) {
        self.stream = stream
        self.handshake = handshake
    }

    deinit { stream.close() }

    // MARK: connecting

    /// Connects and upgrades; throws `.refused(response)` unless the server answers 101.
    public static func connect(port: Int, path: String = "/v1/stream", headers: [(String, String)] = [],
                        tls: Bool = false, receiveBufferSize: Int? = nil, sendBufferSize: Int? = nil,
                        timeout: Double = 5, source: String? = nil) throws -> WebSocketTestClient {
        switch try attempt(port: port, path: path, headers: headers, tls: tls, source: source,
                           receiveBufferSize: receiveBufferSize, sendBufferSize: sendBufferSize, timeout: timeout) {
        case .upgraded(let c): return c
        case .refused(let r): throw TestClientError.refused(r)
        }
    }

    /// Connects and asks for an upgrade; returns the client, or the HTTP response of
    /// a refusal (with its body).
    public static func attempt(port: Int, path: String = "/v1/stream", headers: [(String, String)] = [],
                        tls: Bool = false, source: String? = nil, receiveBufferSize: Int? = nil, sendBufferSize: Int? = nil,
                        timeout: Double = 5) throws -> Outcome {
        let stream = tls
            ? try TestStream.tls(port: port)
            : try TestStream.tcp(port: port, source: source, receiveBufferSize: receiveBufferSize, sendBufferSize: sendBufferSize)
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        var text = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        for (n, v) in headers { text += "\(n): \(v)\r\n" }
        text += "\r\n"
        let deadline = Deadline(timeout)
        do {
            try stream.write(Array(text.utf8), timeout: timeout)
            var response = try TestHTTPResponse.readHead(from: stream, deadline: deadline)
            guard response.status == 101 else {
                try response.readBody(from: stream, deadline: deadline)
                stream.close()
                return .refused(response)
            }
            let expected = Data(SHA1.hash(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))).base64EncodedString()
            guard response.header("sec-websocket-accept") == expected else {
                throw TestClientError.protocolError("bad Sec-WebSocket-Accept: \(response.header("sec-websocket-accept") ?? "none")")
            }
            return .upgraded(WebSocketTestClient(stream: stream, handshake: response))
        } catch {
            stream.close()
            throw error
        }
    }

    // MARK: sending

    /// Sends a text message, split into frames of `fragmentSize` payload bytes if given.
    public func sendText(_ text: String, fragmentSize: Int? = nil, timeout: Double = 5) throws {
        try sendMessage(.text, Array(text.utf8), fragmentSize: fragmentSize, timeout: timeout)
    }

    /// Sends a binary message, split into frames of `fragmentSize` payload bytes if given.
    public func sendBinary(_ bytes: [UInt8], fragmentSize: Int? = nil, timeout: Double = 5) throws {
        try sendMessage(.binary, bytes, fragmentSize: fragmentSize, timeout: timeout)
    }

    public func sendPing(_ payload: [UInt8] = [], timeout: Double = 5) throws {
        try sendFrame(.ping, payload, timeout: timeout)
    }

    /// Sends a close frame (code and reason; no code means an empty close frame).
    public func sendClose(code: UInt16? = 1000, reason: String = "", timeout: Double = 5) throws {
        var payload: [UInt8] = []
        if let code { payload = [UInt8(code >> 8), UInt8(code & 0xff)] + Array(reason.utf8) }
        try sendFrame(.close, payload, timeout: timeout)
        sentClose = true
    }

    private func sendMessage(_ opcode: Opcode, _ payload: [UInt8], fragmentSize: Int?, timeout: Double) throws {
        guard let size = fragmentSize, size > 0, payload.count > size else {
            try sendFrame(opcode, payload, timeout: timeout)
            return
        }
        var offset = 0
        while offset < payload.count {
            let end = min(offset + size, payload.count)
            try sendFrame(offset == 0 ? opcode : .continuation, Array(payload[offset..<end]), fin: end == payload.count, timeout: timeout)
            offset = end
        }
    }

    /// Sends one frame. `masked: false` or a raw `opcodeValue` make protocol
    /// violations on purpose.
    public func sendFrame(_ opcode: Opcode, _ payload: [UInt8], fin: Bool = true, masked: Bool = true, timeout: Double = 5) throws {
        try sendFrame(opcodeValue: opcode.rawValue, payload, fin: fin, masked: masked, timeout: timeout)
    }

    public func sendFrame(opcodeValue: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, masked: Bool = true, timeout: Double = 5) throws {
        try stream.write(Self.encodeFrame(opcodeValue: opcodeValue, payload, fin: fin, rsv: rsv, masked: masked), timeout: timeout)
    }

    /// Raw bytes, for garbage.
    public func sendRaw(_ bytes: [UInt8], timeout: Double = 5) throws {
        try stream.write(bytes, timeout: timeout)
    }

    /// Writes bytes left unsent by a write that timed out.
    public func flush(timeout: Double = 5) throws { try stream.flush(timeout: timeout) }

    public var hasUnsentBytes: Bool { !stream.unsent.isEmpty }

    public static func encodeFrame(opcodeValue: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0, masked: Bool = true) -> [UInt8] {
        var frame: [UInt8] = [(fin ? 0x80 : 0) | (rsv & 0x7) << 4 | (opcodeValue & 0x0f)]
        let maskBit: UInt8 = masked ? 0x80 : 0
        switch payload.count {
        case 0..<126:
            frame.append(maskBit | UInt8(payload.count))
        case 126..<65536:
            frame.append(maskBit | 126)
            frame += [UInt8(payload.count >> 8), UInt8(payload.count & 0xff)]
        default:
            frame.append(maskBit | 127)
            for i in (0..<8).reversed() { frame.append(UInt8(truncatingIfNeeded: UInt64(payload.count) >> (UInt64(i) * 8))) }
        }
        if masked {
            let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
            frame += mask
            frame.reserveCapacity(frame.count + payload.count)
            for (i, b) in payload.enumerated() { frame.append(b ^ mask[i & 3]) }
        } else {
            frame += payload
        }
        return frame
    }

    // MARK: receiving

    /// The next message: text or binary (fragments joined), a pong, or the close
    /// frame. Pings are answered (if `autoPong`) and not returned.
    public func receive(timeout: Double = 5) throws -> Message {
        let deadline = Deadline(timeout)
        var partial: (opcode: Opcode, data: [UInt8])?
        while true {
            let frame = try readFrame(deadline: deadline)
            switch frame.opcode {
            case .ping:
                if autoPong && !sentClose { try sendFrame(.pong, frame.payload, timeout: max(0.1, Double(deadline.remainingMilliseconds) / 1000)) }
            case .pong:
                return .pong(frame.payload)
            case .close:
                var code: UInt16?
                var reason = ""
                if frame.payload.count >= 2 {
                    code = UInt16(frame.payload[0]) << 8 | UInt16(frame.payload[1])
                    reason = String(decoding: frame.payload[2...], as: UTF8.self)
                }
                let m = Message.close(code: code, reason: reason)
                receivedClose = m
                // RFC 6455 5.5.1: answer a close frame with one (echoing the code),
                // so the server can end the connection at once.
                if autoCloseReply && !sentClose {
                    try? sendClose(code: code, reason: "", timeout: 1)
                }
                return m
            case .text, .binary:
                guard partial == nil else { throw TestClientError.protocolError("new data frame inside a fragmented message") }
                if frame.fin { return frame.opcode == .text ? .text(String(decoding: frame.payload, as: UTF8.self)) : .binary(frame.payload) }
                partial = (frame.opcode, frame.payload)
            case .continuation:
                guard var p = partial else { throw TestClientError.protocolError("continuation without a message") }
                p.data += frame.payload
                if frame.fin { return p.opcode == .text ? .text(String(decoding: p.data, as: UTF8.self)) : .binary(p.data) }
                partial = p
            }
        }
    }

    /// Reads one frame as it is on the wire.
    public func readFrame(deadline: Deadline) throws -> (opcode: Opcode, fin: Bool, payload: [UInt8]) {
        let head = try stream.read(exactly: 2, deadline: deadline)
        let fin = head[0] & 0x80 != 0
        guard head[0] & 0x70 == 0 else { throw TestClientError.protocolError("RSV bits set by the server") }
        guard let opcode = Opcode(rawValue: head[0] & 0x0f) else { throw TestClientError.protocolError("opcode \(head[0] & 0x0f)") }
        guard head[1] & 0x80 == 0 else { throw TestClientError.protocolError("server frames must not be masked") }
        var length = Int(head[1] & 0x7f)
        if length == 126 {
            let b = try stream.read(exactly: 2, deadline: deadline)
            length = Int(b[0]) << 8 | Int(b[1])
        } else if length == 127 {
            let b = try stream.read(exactly: 8, deadline: deadline)
            length = b.reduce(0) { $0 << 8 | Int($1) }
        }
        let payload = try stream.read(exactly: length, deadline: deadline)
        return (opcode, fin, payload)
    }

    /// Reads messages until a close frame arrives (or the connection ends).
    /// Returns the messages before it and the close frame (nil if the stream just
    /// ended without one).
    public func receiveUntilClose(timeout: Double = 5) throws -> (messages: [Message], close: Message?) {
        let deadline = Deadline(timeout)
        var messages: [Message] = []
        while true {
            do {
                let m = try receive(timeout: max(0.001, Double(deadline.remainingMilliseconds) / 1000))
                if case .close = m { return (messages, m) }
                messages.append(m)
            } catch TestClientError.closed {
                return (messages, nil)
            }
        }
    }

    /// Closing handshake: sends a close frame, reads until the server's close frame,
    /// then waits for the server to end the TCP connection.
    @discardableResult
    public func close(code: UInt16? = 1000, reason: String = "", timeout: Double = 5) throws -> (messages: [Message], close: Message?) {
        if !sentClose { try sendClose(code: code, reason: reason, timeout: timeout) }
        let result = receivedClose == nil ? try receiveUntilClose(timeout: timeout) : ([], receivedClose)
        _ = try? stream.awaitEOF(deadline: Deadline(timeout))
        stream.close()
        return result
    }

    /// Waits until the server ends the TCP connection (after a close frame).
    public func awaitDisconnect(timeout: Double = 5) throws {
        _ = try stream.awaitEOF(deadline: Deadline(timeout))
    }

    /// Drops the TCP connection without a closing handshake.
    public func disconnect() { stream.close() }
}
