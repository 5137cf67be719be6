import CLwsShims
import StenoCore

// Values that cross between the transport and the session layer. None of them
// knows about JSON events or audio: the transport moves opaque messages.

/// Identifies one WebSocket connection for its whole life. Never reused within a
/// process, never a pointer: only the lws service thread ever sees a `wsi`.
public struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.rawValue < b.rawValue }
    public var description: String { "#\(rawValue)" }
}

/// A complete message received from a client (fragments already joined).
public enum IncomingMessage: Sendable, Equatable {
    case text(String)
    case binary([UInt8])
}

/// A message to send. Its bytes are shared, not copied, between the connections it goes to
/// (a broadcast final to every viewer); each connection copies them once, into the frame it
/// writes.
public struct OutgoingMessage: Sendable {
    public enum Kind: Sendable, Equatable { case text, binary }

    public let kind: Kind
    public let delivery: OutboundDelivery
    public let bytes: [UInt8]
    /// Where the connection writes the message's ordinal as it writes the message: the decimal
    /// number 1, 2, 3 … of this message among the numbered messages written to that
    /// connection replaces these bytes. Numbering at write time keeps the numbers gapless
    /// even when unsent replaceable messages were dropped. nil: not numbered.
    public let ordinalSlot: SeqSlot?
    /// A numbered message written before on another connection, sent again as it was (a
    /// replay after the client resumed): its frame and its ordinal.
    let written: (frame: FrameBuffer, ordinal: UInt64)?

    public init(kind: Kind, bytes: [UInt8], delivery: OutboundDelivery = .mustDeliver, ordinalSlot: SeqSlot? = nil) {
        self.kind = kind
        self.delivery = delivery
        self.bytes = bytes
        self.ordinalSlot = ordinalSlot.map { SeqSlot($0.digits.clamped(to: 0..<bytes.count)) }
        self.written = nil
    }

    init(replaying frame: FrameBuffer, kind: Kind, ordinal: UInt64) {
        self.kind = kind
        self.delivery = .mustDeliver
        self.bytes = []
        self.ordinalSlot = nil
        self.written = (frame, ordinal)
    }

    public static func text(_ text: String, delivery: OutboundDelivery = .mustDeliver) -> OutgoingMessage {
        OutgoingMessage(kind: .text, bytes: Array(text.utf8), delivery: delivery)
    }

    public static func binary(_ bytes: [UInt8], delivery: OutboundDelivery = .mustDeliver) -> OutgoingMessage {
        OutgoingMessage(kind: .binary, bytes: bytes, delivery: delivery)
    }

    /// Payload size in bytes (what counts against the outbound limit).
    public var byteCount: Int { written?.frame.payloadCount ?? bytes.count }
}

/// What a connection that kept its written messages (`TransportHandle.retainWritten`) left
/// behind when it closed: the numbered messages it wrote most recently (the peer may not have
/// received them), what it had not written yet, and where its numbering stood. A session layer
/// that lets a client resume on a new connection hands it to `TransportHandle.adopt`.
public struct OutboundBacklog: Sendable {
    /// Numbered messages written, oldest first, each with its ordinal.
    let written: [(ordinal: UInt64, frame: FrameBuffer, kind: OutgoingMessage.Kind)]
    /// Messages queued and not written, in order.
    public let unsent: [OutgoingMessage]
    /// The ordinal of the last numbered message written (0 if none).
    public let lastOrdinal: UInt64

    /// Whether every numbered message after `ordinal` can still be sent again.
    public func canReplay(after ordinal: UInt64) -> Bool {
        guard ordinal <= lastOrdinal else { return false }
        if ordinal == lastOrdinal { return true }
        guard let first = written.first else { return false }
        return first.ordinal <= ordinal + 1
    }

    /// What a new connection must send first: the written messages after `ordinal` again,
    /// then the unsent ones.
    func replay(after ordinal: UInt64) -> [OutgoingMessage] {
        written.filter { $0.ordinal > ordinal }.map { OutgoingMessage(replaying: $0.frame, kind: $0.kind, ordinal: $0.ordinal) }
            + unsent
    }
}

/// Payload bytes with `LWS_PRE` bytes of headroom in front, as `lws_write` needs.
///
/// `@unchecked Sendable`: the payload is written once in `init` and never changed.
/// The headroom is scratch space that `lws_write` fills with the frame header; it is
/// only ever touched on the lws service thread, one write at a time.
final class FrameBuffer: @unchecked Sendable {
    let storage: UnsafeMutableRawPointer
    let payloadCount: Int

    /// `message`'s bytes, with `ordinal` written in its slot if it has one: copied once, from
    /// the message into the frame.
    init(_ message: OutgoingMessage, ordinal: UInt64) {
        let pre = steno_lws_pre
        let bytes = message.bytes
        let count = message.ordinalSlot?.count(numbering: bytes.count, seq: ordinal) ?? bytes.count
        payloadCount = count
        storage = UnsafeMutableRawPointer.allocate(byteCount: pre + max(count, 1), alignment: 16)
        let out = storage + pre
        if let slot = message.ordinalSlot {
            slot.write(bytes, seq: ordinal, to: out)
        } else {
            bytes.withUnsafeBytes { source in
                if let base = source.baseAddress { out.copyMemory(from: base, byteCount: source.count) }
            }
        }
    }

    /// Where the payload starts (after the headroom).
    var payload: UnsafeMutablePointer<UInt8> {
        (storage + steno_lws_pre).assumingMemoryBound(to: UInt8.self)
    }

    deinit { storage.deallocate() }
}

/// What `send` did with a message.
public enum SendResult: Sendable, Equatable {
    /// Queued for the connection.
    case queued
    /// Queued, and an older unsent message with the same replacement key was dropped.
    case replaced
    /// The connection's outbound limit would be exceeded: nothing was queued. The
    /// protocol then closes the connection with 4008 (`slow_consumer`).
    case overflow
    /// The connection is closed or closing: nothing was queued.
    case closed
}

/// One `name=value` pair of a query string, percent-decoded.
public struct QueryItem: Sendable, Equatable {
    public let name: String
    public let value: String
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// HTTP header fields of a request, names matched case-insensitively.
public struct HTTPHeaders: Sendable, Equatable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init(_ fields: [(String, String)] = []) {
        for (n, v) in fields { add(n, v) }
    }

    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name.lowercased(), value: value))
    }

    /// The first value of `name`.
    public subscript(name: String) -> String? {
        let n = name.lowercased()
        return fields.first { $0.name == n }?.value
    }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.elementsEqual(b.fields) { $0.name == $1.name && $0.value == $1.value }
    }
}

/// A WebSocket upgrade request, seen before any session exists.
public struct UpgradeRequest: Sendable, Equatable {
    /// Path without the query, percent-decoded by libwebsockets (e.g. `/v1/stream`).
    public var path: String
    public var query: [QueryItem]
    /// The request headers the transport reads: `authorization`, `origin`, `host`,
    /// `user-agent`, `sec-websocket-protocol`, `x-forwarded-for`, `content-type`.
    public var headers: HTTPHeaders
    /// Peer IP address as text.
    public var remoteAddress: String

    public init(path: String, query: [QueryItem] = [], headers: HTTPHeaders = HTTPHeaders(), remoteAddress: String = "") {
        self.path = path
        self.query = query
        self.headers = headers
        self.remoteAddress = remoteAddress
    }

    /// The first value of query parameter `name`.
    public func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
}

/// One HTTP request whose answer comes later (`TransportHandle.respond`): never reused within
/// a process.
public struct HTTPExchange: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "http#\(rawValue)" }
}

/// The transport's answer to an upgrade request.
public enum UpgradeDecision: Sendable, Equatable {
    /// Switch protocols; the connection becomes a WebSocket.
    case accept
    /// Switch protocols naming this subprotocol in the 101, which the client offered first: a
    /// convention that carries something else in the list (Deepgram's browser clients offer
    /// `token, KEY` and need `token` back).
    case acceptNaming(subprotocol: String)
    /// Answer with this HTTP response and close the connection.
    case reject(HTTPResponse)

    /// A refusal with a short plain-text body naming the status.
    public static func reject(status: Int, headers: [(String, String)] = []) -> UpgradeDecision {
        .reject(.plain(status: status, headers: headers))
    }
}

public enum HTTPMethod: Sendable, Equatable {
    case get, head, other(String)
}

/// A plain HTTP request (not an upgrade).
public struct HTTPRequest: Sendable, Equatable {
    public var method: HTTPMethod
    /// Path without the query, percent-decoded by libwebsockets.
    public var path: String
    public var query: [QueryItem]
    public var headers: HTTPHeaders
    public var remoteAddress: String

    public init(method: HTTPMethod = .get, path: String, query: [QueryItem] = [], headers: HTTPHeaders = HTTPHeaders(), remoteAddress: String = "") {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.remoteAddress = remoteAddress
    }

    public func queryValue(_ name: String) -> String? { query.first { $0.name == name }?.value }
}

/// An HTTP response. `Content-Length` is added by the transport; for HEAD the body
/// is not sent.
public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var contentType: String
    public var body: [UInt8]
    /// Extra header fields, e.g. `("Retry-After", "5")`.
    public var headers: [(name: String, value: String)]

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", body: [UInt8] = [], headers: [(String, String)] = []) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.headers = headers.map { (name: $0.0, value: $0.1) }
    }

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", text: String, headers: [(String, String)] = []) {
        self.init(status: status, contentType: contentType, body: Array(text.utf8), headers: headers)
    }

    public static func == (a: HTTPResponse, b: HTTPResponse) -> Bool {
        a.status == b.status && a.contentType == b.contentType && a.body == b.body
            && a.headers.elementsEqual(b.headers) { $0.name == $1.name && $0.value == $1.value }
    }

    /// A response whose plain-text body names the status: "404 Not Found".
    public static func plain(status: Int, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, text: "\(status) \(reasonPhrase(status))\n", headers: headers)
    }

    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 200: "OK"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 503: "Service Unavailable"
        default: "Status"
        }
    }
}
