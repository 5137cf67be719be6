import StenoCore

/// A server event as a client reads it: its `type`, `seq` and fields, and the text it came as
/// (what `--format jsonl` prints).
struct ServerMessage: Sendable, Equatable {
    let type: String
    let seq: Int?
    let object: JSONObject
    let text: String

    /// Nil for a text that is not a JSON object with a string `type`.
    init?(_ text: String) {
        guard let value = try? JSONParser(maxDepth: 16, maxBytes: 4 << 20).parse(text),
              case .object(let object) = value, case .string(let type)? = object["type"] else { return nil }
        self.type = type
        self.object = object
        self.text = text
        if case .number(let n)? = object["seq"], n >= 0, n < 1e15, n == n.rounded() { seq = Int(n) } else { seq = nil }
    }

    func number(_ key: String) -> Double? {
        if case .number(let n)? = object[key], n.isFinite { return n }
        return nil
    }

    func string(_ key: String) -> String? {
        if case .string(let s)? = object[key] { return s }
        return nil
    }

    func bool(_ key: String) -> Bool? {
        if case .bool(let b)? = object[key] { return b }
        return nil
    }

    func objectField(_ key: String) -> JSONObject? {
        if case .object(let o)? = object[key] { return o }
        return nil
    }

    /// The event, as StenoCore's `ServerEvent` reads it back (whole or not at all).
    var event: ServerEvent? { ServerEvent(wire: object) }

    /// The result a `final` or `volatile` carries.
    var result: RecognitionResult? {
        switch event {
        case .final(let result, _)?, .volatile(let result, _)?: result
        default: nil
        }
    }

    /// For `error`: its code, message, and whether the session is over. A code this version
    /// does not know is told as it came (the event does not read it), fatal as the server said.
    var error: (code: String, message: String, fatal: Bool)? {
        switch event {
        case .error(let error)?: return (error.code.rawValue, error.message, error.code.isFatal)
        case .lowConfidence?: return (ErrorCode.lowConfidence.rawValue, string("message") ?? "", false)
        default:
            guard type == "error" else { return nil }
            return (string("code") ?? "", string("message") ?? "", bool("fatal") ?? false)
        }
    }
}
