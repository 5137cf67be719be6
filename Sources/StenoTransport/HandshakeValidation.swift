import Foundation

/// The checks RFC 6455 §4.2.1 asks of an opening handshake, made on its raw headers before
/// the upgrade goes to libwebsockets, which in 4.1.6 accepts any `Sec-WebSocket-Version`, any
/// key, and drops with no answer at all a request without `Host`, without a key, without
/// `Connection: Upgrade`, or with a subprotocol list it cannot match or tokenize (see
/// docs/reliability.md). Pure: the service loop reads the headers and answers.
struct HandshakeValidation {
    /// The request line's HTTP version (`HTTP/1.1`), then the header values, as libwebsockets
    /// holds them (nil: absent).
    var httpVersion: String?
    var version: String?
    var key: String?
    var host: String?
    var connection: String?
    var subprotocols: String?

    enum Outcome: Equatable {
        /// A well-formed handshake; `subprotocol` is the one Steno speaks if offered.
        case valid(offered: [String], speaks: Bool)
        case refuse(HTTPResponse)
    }

    /// The subprotocol the transport's protocol is named by (what lws selects when offered).
    static let ownSubprotocol = "steno"
    /// Longest subprotocol list lws 4.1.6 reads (it copies it into 128 bytes, with a NUL).
    static let subprotocolListLimit = 126
    /// Longest subprotocol name it matches (a 64-byte buffer).
    static let subprotocolNameLimit = LwsContextStorage.aliasNameCapacity - 1

    func check() -> Outcome {
        // Version first: a client speaking another version should learn which one to use.
        guard version?.trimmingCharacters(in: .whitespaces) == "13" else {
            let what = version.map { "Sec-WebSocket-Version \"\($0)\" is not supported" } ?? "Sec-WebSocket-Version is missing"
            return .refuse(HTTPResponse(status: 426, text: "426 Upgrade Required: \(what); this server speaks version 13\n",
                                        headers: [("Sec-WebSocket-Version", "13"), ("Upgrade", "websocket")]))
        }
        guard let httpVersion, Self.isAtLeastHTTP11(httpVersion) else {
            return Self.badRequest("a WebSocket handshake needs HTTP/1.1 (this request is \(httpVersion ?? "of no version"))")
        }
        guard let host, !host.trimmingCharacters(in: .whitespaces).isEmpty else {
            return Self.badRequest("the Host header is missing")
        }
        guard let key else { return Self.badRequest("Sec-WebSocket-Key is missing") }
        guard Self.isValidKey(key.trimmingCharacters(in: .whitespaces)) else {
            return Self.badRequest("Sec-WebSocket-Key must be 16 bytes in base64 (24 characters)")
        }
        guard let connection, Self.tokens(connection).contains(where: { $0.lowercased() == "upgrade" }) else {
            return Self.badRequest("the Connection header must include \"Upgrade\"")
        }
        var offered: [String] = []
        if let list = subprotocols {
            guard list.utf8.count <= Self.subprotocolListLimit else {
                return Self.badRequest("Sec-WebSocket-Protocol is longer than \(Self.subprotocolListLimit) bytes")
            }
            let entries = list.split(separator: ",", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: CharacterSet(charactersIn: " \t")) }
            for entry in entries {
                guard Self.isSubprotocolName(entry) else {
                    return Self.badRequest("Sec-WebSocket-Protocol must be a comma-separated list of tokens (\"\(entry)\" is not one)")
                }
            }
            offered = entries
        }
        return .valid(offered: offered, speaks: offered.contains(Self.ownSubprotocol))
    }

    /// `HTTP/1.x` with x ≥ 1 (RFC 6455 §4.1: "at least 1.1"; lws reads only one-digit
    /// versions, and nothing past 1.x upgrades in HTTP/1 syntax).
    static func isAtLeastHTTP11(_ v: String) -> Bool {
        let b = Array(v.utf8)
        guard b.count == 8, String(decoding: b[0..<5], as: UTF8.self).uppercased() == "HTTP/", b[5] == UInt8(ascii: "1"),
              b[6] == UInt8(ascii: "."), (UInt8(ascii: "1")...UInt8(ascii: "9")).contains(b[7]) else { return false }
        return true
    }

    /// A key is the base64 of 16 bytes: 22 characters of the alphabet and `==`.
    static func isValidKey(_ key: String) -> Bool {
        guard key.utf8.count == 24, key.hasSuffix("=="), let data = Data(base64Encoded: key) else { return false }
        return data.count == 16
    }

    /// A subprotocol name lws 4.1.6 can match: an RFC 7230 token of at most 63 bytes with a
    /// letter in it (lws's tokenizer reads a name of digits as a number and fails the list).
    static func isSubprotocolName(_ s: String) -> Bool {
        guard !s.isEmpty, s.utf8.count <= subprotocolNameLimit else { return false }
        var letter = false
        for c in s.utf8 {
            switch c {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"):
                letter = true
            case UInt8(ascii: "0")...UInt8(ascii: "9"):
                break
            default:
                guard "!#$%&'*+-.^_`|~".utf8.contains(c) else { return false }
            }
        }
        return letter
    }

    static func tokens(_ list: String) -> [String] {
        list.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
    }

    static func badRequest(_ why: String) -> Outcome {
        .refuse(HTTPResponse(status: 400, text: "400 Bad Request: \(why)\n"))
    }
}
