import CHiredis

/// A reply of Redis (RESP2, as Redis 7 speaks it to a client that did not ask for RESP3):
/// simple strings, errors, integers, bulk strings (possibly null) and arrays (possibly null,
/// nested). hiredis reads them; this is its `redisReply` as a value.
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

extension RESPValue {
    /// hiredis's reply as a value; hiredis still owns `reply` (whoever got it frees it).
    init(_ reply: UnsafePointer<redisReply>) {
        let r = reply.pointee
        let bytes = { r.str.map { Array(UnsafeRawBufferPointer(start: $0, count: r.len)) } ?? [] }
        switch r.type {
        case REDIS_REPLY_STATUS: self = .simple(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_ERROR: self = .error(String(decoding: bytes(), as: UTF8.self))
        case REDIS_REPLY_INTEGER: self = .integer(Int(r.integer))
        case REDIS_REPLY_STRING: self = .bulk(bytes())
        case REDIS_REPLY_ARRAY: self = .array((0..<r.elements).map { r.element[$0].map { RESPValue($0) } ?? .bulk(nil) })
        default: self = r.integer == NullArrayMarking.mark ? .array(nil) : .bulk(nil)
        }
    }
}

/// Why this wrapper: hiredis 0.14 reads both of RESP2's nulls, the null bulk string (`$-1`)
/// and the null array (`*-1`: a blocking read that timed out), as REDIS_REPLY_NIL. Installed on
/// a reader, it gives the reader hiredis's own reply functions with `createNil` wrapped to mark
/// a null array's nil (in its `integer`, which a nil does not use), so that RESPValue tells
/// `.bulk(nil)` from `.array(nil)` as Redis does. It must outlive the reader.
final class NullArrayMarking {
    static let mark: Int64 = 1
    private let functions = UnsafeMutablePointer<redisReplyObjectFunctions>.allocate(capacity: 1)

    init(on reader: UnsafeMutablePointer<redisReader>) {
        let own = reader.pointee.fn!
        functions.initialize(to: own.pointee)
        functions.pointee.createNil = { task in
            // The reader's own functions, which hiredis hands every task in its `privdata`.
            guard let task, let own = task.pointee.privdata?.assumingMemoryBound(to: redisReplyObjectFunctions.self),
                  let reply = own.pointee.createNil?(task) else { return nil }
            if task.pointee.type == REDIS_REPLY_ARRAY {
                reply.assumingMemoryBound(to: redisReply.self).pointee.integer = NullArrayMarking.mark
            }
            return reply
        }
        reader.pointee.privdata = UnsafeMutableRawPointer(own)
        reader.pointee.fn = functions
    }

    deinit { functions.deallocate() }
}
