// A small, strict JSON reader (RFC 8259) and a writer tuned for the server's events.
//
// Why our own: the client's text frames are untrusted, and we want exact control of
// limits (size, nesting depth), of error messages in plain words, and of how numbers are
// written (times with millisecond precision, never `1.2000000000000002`). No Foundation.
//
// This file holds the values (`JSONValue`, `JSONObject`); JSONParser.swift the reading,
// JSONWriter.swift the writing.

// MARK: - Values

/// A parsed JSON value.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// Every JSON number, as the nearest `Double` (finite: out-of-range numbers are rejected).
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A short name of the value's kind for error messages: "a string", "an object" …
    public var kindDescription: String {
        switch self {
        case .null: return "null"
        case .bool: return "a boolean"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// This value written as compact JSON text (keys in their original order).
    public var jsonText: String {
        var writer = JSONWriter()
        writer.value(self)
        return writer.text
    }
}

/// A JSON object: members by key, plus the order the keys appeared in.
/// Keys are unique (the parser rejects duplicates). Equality ignores key order.
public struct JSONObject: Sendable, Hashable {
    public private(set) var keys: [String] = []
    private var members: [String: JSONValue] = [:]

    public init() {}

    public init(_ pairs: KeyValuePairs<String, JSONValue>) {
        for (key, value) in pairs { self[key] = value }
    }

    public var count: Int { keys.count }

    /// The member named `key`, or nil. Setting a new key appends it to `keys`; setting nil removes it.
    public subscript(key: String) -> JSONValue? {
        get { members[key] }
        set {
            if let newValue {
                if members.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if members.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool { lhs.members == rhs.members }
    public func hash(into hasher: inout Hasher) { hasher.combine(members) }
}

/// Upper-case hexadecimal digits, for the reader's error messages and the writer's `\u` escapes.
let hexDigits: [UInt8] = Array("0123456789ABCDEF".utf8)
