import StenoCore
import StenoRedis

/// One entry of a channel's Redis stream (`steno:channel:NAME`), as `ChannelRelay` writes it
/// and reads it back on the other instances. Fields: `i` the instance that wrote it, `s` the
/// publisher's session, `k` the kind, `d` the data:
///
/// - `live`: a broadcast began (or its instance says so again after Redis came back):
///   `{"broadcast":ID,"startedAt":MS,"words":BOOL,"captions":TAG,"original":TAG}` (`startedAt` in
///   ms since 1970; `captions` and `original` its `Renditions`, each only when there).
/// - `event`: one of the publisher's `volatile`, `final` or `speech` events, as sent to viewers.
/// - `floor`: no final still to come starts before this time (settles caption cues and HLS).
/// - `end`: the broadcast is over: `{"state":"ended"|"lost","duration":SECONDS,"endedAt":MS}`
///   (`endedAt`, its end on the publisher's clock, so that every instance says the same; an
///   entry without it ends when it is read).
enum RelayEntry: Sendable, Equatable {
    case live(broadcast: String, startedAt: UTCTime, includeWords: Bool, renditions: Renditions = Renditions())
    /// The event as viewers get it; read back, a `final` or `volatile` carries its result
    /// (`EncodedEvent.result`) as the publisher's did.
    case event(EncodedEvent)
    case floor(Double)
    case end(state: PublisherState, duration: Double, endedAt: UTCTime?)

    var kind: String {
        switch self {
        case .live: "live"
        case .event: "event"
        case .floor: "floor"
        case .end: "end"
        }
    }

    /// The data field.
    var data: String {
        switch self {
        case .live(let broadcast, let startedAt, let includeWords, let renditions):
            var w = JSONWriter(capacity: 80)
            w.beginObject()
            w.field("broadcast", broadcast)
            w.field("startedAt", integer: Int(startedAt.millisecondsSince1970))
            w.field("words", includeWords)
            if let captions = renditions.captions { w.field("captions", captions) }
            if let original = renditions.original { w.field("original", original) }
            w.endObject()
            return String(decoding: w.bytes, as: UTF8.self)
        case .event(let event):
            return event.text
        case .floor(let floor):
            return JSONWriter.secondsText(floor)
        case .end(let state, let duration, let endedAt):
            var w = JSONWriter(capacity: 72)
            w.beginObject()
            w.field("state", state.rawValue)
            w.field("duration", seconds: duration)
            if let endedAt { w.field("endedAt", integer: Int(endedAt.millisecondsSince1970)) }
            w.endObject()
            return String(decoding: w.bytes, as: UTF8.self)
        }
    }

    /// `XADD` field-value pairs. `number` counts the instance's entries (0: one that may be
    /// written twice, such as `live` said again), so that a reader skips an entry written again
    /// after a write whose answer was lost.
    func fields(instance: String, session: String, number: UInt64) -> [String] {
        ["i", instance, "s", session, "n", String(number), "k", kind, "d", data]
    }

    /// An entry read back: who wrote it, for which session, and what; nil for anything that
    /// is not a well-formed entry (a stream another program wrote into, a newer version).
    static func parse(_ fields: [RESPValue], includeWords: Bool)
        -> (instance: String, session: String, number: UInt64, entry: RelayEntry)? {
        var values: [String: String] = [:]
        var index = 0
        while index + 1 < fields.count {
            if let key = fields[index].text, let value = fields[index + 1].text { values[key] = value }
            index += 2
        }
        guard let instance = values["i"], let session = values["s"], let kind = values["k"], let data = values["d"],
              let entry = entry(kind: kind, data: data, includeWords: includeWords) else { return nil }
        return (instance, session, values["n"].flatMap { UInt64($0) } ?? 0, entry)
    }

    static func entry(kind: String, data: String, includeWords: Bool) -> RelayEntry? {
        switch kind {
        case "floor":
            return Double(data).flatMap { $0.isFinite ? .floor($0) : nil }
        case "live":
            guard let object = object(data), case .string(let broadcast)? = object["broadcast"],
                  case .number(let ms)? = object["startedAt"], ms.isFinite, abs(ms) < 1e15 else { return nil }
            var words = true
            if case .bool(let b)? = object["words"] { words = b }
            var renditions = Renditions()
            if case .string(let tag)? = object["captions"] { renditions.captions = tag }
            if case .string(let tag)? = object["original"] { renditions.original = tag }
            return .live(broadcast: broadcast, startedAt: UTCTime(millisecondsSince1970: Int64(ms)), includeWords: words,
                         renditions: renditions)
        case "end":
            guard let object = object(data), case .string(let name)? = object["state"],
                  let state = PublisherState(rawValue: name), case .number(let duration)? = object["duration"] else { return nil }
            var endedAt: UTCTime?
            if case .number(let ms)? = object["endedAt"], ms.isFinite, abs(ms) < 1e15 { endedAt = UTCTime(millisecondsSince1970: Int64(ms)) }
            return .end(state: state, duration: duration, endedAt: endedAt)
        case "event":
            // What a channel relays (volatile, final, speech), read as the events they are; a
            // result carries words as the publisher's session said.
            guard let object = object(data), let event = ServerEvent(wire: object), event.kind.isBroadcast else { return nil }
            switch event {
            case .final(let result, _): return .event(ServerEvent.final(result, includeWords: includeWords).encoded())
            case .volatile(let result, _): return .event(ServerEvent.volatile(result, includeWords: includeWords).encoded())
            default: return .event(event.encoded())
            }
        default:
            return nil
        }
    }

    private static func object(_ text: String) -> JSONObject? {
        guard case .object(let object)? = try? JSONParser().parse(text) else { return nil }
        return object
    }
}
