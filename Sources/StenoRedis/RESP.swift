/// The Redis serialization protocol (RESP2), as Redis 7 speaks it to a client that did not
/// ask for RESP3: commands go out as arrays of bulk strings; replies are simple strings,
/// errors, integers, bulk strings (possibly null) and arrays (possibly null, nested).
public enum RESPValue: Sendable, Equatable, CustomStringConvertible {
    case simple(String)
    case error(String)
    case integer(Int)
    /// nil: the null bulk string (`$-1`).
    case bulk([UInt8]?)
    /// nil: the null array (`*-1`), e.g. a blocking read that timed out.
    case array([RESPValue]?)

    /// A bulk or simple string's text.
    public var text: String? {
        switch self {
        case .simple(let s): return s
        case .bulk(let bytes?): return String(decoding: bytes, as: UTF8.self)
        default: return nil
        }
    }

    public var elements: [RESPValue]? {
        if case .array(let items?) = self { return items }
        return nil
    }

    public var description: String {
        switch self {
        case .simple(let s): return "+\(s)"
        case .error(let s): return "-\(s)"
        case .integer(let n): return ":\(n)"
        case .bulk(nil): return "(nil)"
        case .bulk(let b?): return "\"\(String(decoding: b, as: UTF8.self))\""
        case .array(nil): return "(nil array)"
        case .array(let items?): return "[" + items.map(\.description).joined(separator: ", ") + "]"
        }
    }
}

/// A command for Redis: an array of bulk strings, binary-safe.
public enum RESPCommand {
    public static func encode(_ arguments: [String]) -> [UInt8] {
        encode(bytes: arguments.map { Array($0.utf8) })
    }

    public static func encode(bytes arguments: [[UInt8]]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(16 + arguments.reduce(0) { $0 + $1.count + 16 })
        out.append(UInt8(ascii: "*"))
        out.append(contentsOf: Array(String(arguments.count).utf8))
        out.append(contentsOf: [13, 10])
        for argument in arguments {
            out.append(UInt8(ascii: "$"))
            out.append(contentsOf: Array(String(argument.count).utf8))
            out.append(contentsOf: [13, 10])
            out.append(contentsOf: argument)
            out.append(contentsOf: [13, 10])
        }
        return out
    }
}

/// What is wrong with bytes that claim to be RESP.
public struct RESPProtocolError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { "bad reply from Redis: \(message)" }
}

/// Reads replies out of bytes as they arrive, in any pieces. Bounded: a reply that claims
/// more than `maxBulkBytes` in one string, more than `maxElements` in one array or nests
/// deeper than `maxDepth` is a protocol error, not an allocation.
public struct RESPParser: Sendable {
    public var maxBulkBytes = 64 << 20
    public var maxElements = 1 << 20
    public var maxDepth = 16
    private var buffer: [UInt8] = []
    private var offset = 0

    public init() {}

    public mutating func append(_ bytes: some Sequence<UInt8>) { buffer.append(contentsOf: bytes) }

    /// Bytes received and not yet part of a whole reply.
    public var buffered: Int { buffer.count - offset }

    /// The next whole reply, or nil until more bytes arrive.
    public mutating func next() throws(RESPProtocolError) -> RESPValue? {
        var position = offset
        guard let value = try parse(at: &position, depth: 0) else { return nil }
        offset = position
        if offset > 65536 && offset * 2 > buffer.count {
            buffer.removeFirst(offset)
            offset = 0
        }
        return value
    }

    private func line(at position: inout Int) -> ArraySlice<UInt8>? {
        var i = position
        while i + 1 < buffer.count {
            if buffer[i] == 13 && buffer[i + 1] == 10 {
                let slice = buffer[position..<i]
                position = i + 2
                return slice
            }
            i += 1
        }
        return nil
    }

    private func integer(_ bytes: ArraySlice<UInt8>) throws(RESPProtocolError) -> Int {
        guard !bytes.isEmpty, bytes.count <= 20, let n = Int(String(decoding: bytes, as: UTF8.self)) else {
            throw RESPProtocolError("not a number: \(String(decoding: bytes.prefix(24), as: UTF8.self))")
        }
        return n
    }

    private func parse(at position: inout Int, depth: Int) throws(RESPProtocolError) -> RESPValue? {
        guard depth <= maxDepth else { throw RESPProtocolError("arrays nested more than \(maxDepth) deep") }
        guard position < buffer.count else { return nil }
        let type = buffer[position]
        var p = position + 1
        guard let header = line(at: &p) else {
            if buffer.count - position > 64 << 10 { throw RESPProtocolError("a line longer than 64 KiB") }
            return nil
        }
        switch type {
        case UInt8(ascii: "+"):
            position = p
            return .simple(String(decoding: header, as: UTF8.self))
        case UInt8(ascii: "-"):
            position = p
            return .error(String(decoding: header, as: UTF8.self))
        case UInt8(ascii: ":"):
            let n = try integer(header)
            position = p
            return .integer(n)
        case UInt8(ascii: "$"):
            let length = try integer(header)
            if length == -1 {
                position = p
                return .bulk(nil)
            }
            guard length >= 0, length <= maxBulkBytes else { throw RESPProtocolError("a bulk string of \(length) bytes") }
            guard buffer.count - p >= length + 2 else { return nil }
            guard buffer[p + length] == 13, buffer[p + length + 1] == 10 else {
                throw RESPProtocolError("a bulk string not ended by CRLF")
            }
            let bytes = Array(buffer[p..<(p + length)])
            position = p + length + 2
            return .bulk(bytes)
        case UInt8(ascii: "*"):
            let count = try integer(header)
            if count == -1 {
                position = p
                return .array(nil)
            }
            guard count >= 0, count <= maxElements else { throw RESPProtocolError("an array of \(count) elements") }
            var items: [RESPValue] = []
            items.reserveCapacity(min(count, 1024))
            for _ in 0..<count {
                guard let item = try parse(at: &p, depth: depth + 1) else { return nil }
                items.append(item)
            }
            position = p
            return .array(items)
        default:
            throw RESPProtocolError("unknown reply type byte \(type)")
        }
    }
}
