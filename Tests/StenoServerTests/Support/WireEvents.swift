import StenoCore
import StenoSession
import StenoSystem
import StenoTestSupport

// End-to-end test support: the server's events as a client receives them, and what
// `LocalSession` gives for an input, to compare them with.

/// A server event as received: its JSON and the fields tests look at.
struct WireEvent: CustomStringConvertible, Sendable {
    let text: String
    let object: JSONObject

    init(_ text: String) throws {
        self.text = text
        guard case .object(let object) = try JSONParser().parse(text) else {
            throw TestClientError.protocolError("an event that is not a JSON object: \(text)")
        }
        self.object = object
    }

    var type: String { string("type") ?? "?" }
    var seq: Int { Int(number("seq") ?? -1) }
    var description: String { text.count > 160 ? String(text.prefix(160)) + "…" : text }

    func number(_ key: String) -> Double? { if case .number(let n)? = object[key] { n } else { nil } }
    func string(_ key: String) -> String? { if case .string(let s)? = object[key] { s } else { nil } }
    func bool(_ key: String) -> Bool? { if case .bool(let b)? = object[key] { b } else { nil } }

    /// The result of a `final` or `volatile`.
    var result: TestResult? {
        guard type == "final" || type == "volatile", let start = number("start"), let end = number("end"),
              let text = string("text") else { return nil }
        var words: [TestWord] = []
        if case .array(let items)? = object["words"] {
            for case .object(let w) in items {
                guard case .string(let word)? = w["word"], case .number(let s)? = w["start"],
                      case .number(let e)? = w["end"] else { continue }
                var confidence: Double?
                if case .number(let c)? = w["confidence"] { confidence = c }
                words.append(TestWord(word: word, start: s, end: e, confidence: confidence))
            }
        }
        return TestResult(start: start, end: end, text: text, words: words)
    }

    /// The error code of an `error`.
    var errorCode: String? { type == "error" ? string("code") : nil }
}

struct TestWord: Equatable, Sendable {
    var word: String
    var start: Double
    var end: Double
    var confidence: Double?
}

/// A final or volatile result, without `seq`: what must be equal between two runs.
struct TestResult: Equatable, Sendable, CustomStringConvertible {
    var start: Double
    var end: Double
    var text: String
    var words: [TestWord]

    var description: String { "[\(start)–\(end)] \(text)" }
}

extension Array where Element == WireEvent {
    var finals: [TestResult] { filter { $0.type == "final" }.compactMap(\.result) }
    var types: [String] { map(\.type) }
    func first(_ type: String) -> WireEvent? { first { $0.type == type } }
    func index(of type: String) -> Int? { firstIndex { $0.type == type } }
    var errors: [WireEvent] { filter { $0.type == "error" } }
    /// The words of every final, in order.
    var finalWords: [String] { finals.flatMap { $0.text.split(separator: " ").map(String.init) } }
}

// MARK: - References

/// What `LocalSession` (the same machine and pipeline, run synchronously) gives for an input:
/// the events a client would receive. Cached per input name (several tests send the same audio).
enum Reference {
    private static let cache = Locked<[String: [WireEvent]]>([:])

    static func events(_ input: TestInput, finalizeAt: [(index: Int, message: String)] = []) -> [WireEvent] {
        let key = input.name + finalizeAt.map { "|\($0.index):\($0.message)" }.joined()
        if let hit = cache.withLock({ $0[key] }) { return hit }
        let session = LocalSession(engine: SharedEngine.engine)
        session.send(text: input.startMessage)
        for (i, message) in input.messages.enumerated() {
            for control in finalizeAt where control.index == i { session.send(text: control.message) }
            session.send(audio: message)
        }
        session.end()
        let events = session.events.map { try! WireEvent($0.text) }
        cache.withLock { $0[key] = events }
        return events
    }

    static func finals(_ input: TestInput) -> [TestResult] { events(input).finals }
}
