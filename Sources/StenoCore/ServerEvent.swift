// The server → client events of docs/protocol.md and their JSON encoding.

/// What `ready` says about the recognizer serving the session.
public struct EngineInfo: Sendable, Hashable {
    /// Recognizer name, e.g. "pocketsphinx".
    public var name: String
    /// Model name, e.g. "en-us".
    public var model: String
    /// The language the model recognizes, as a BCP 47 tag, e.g. "en-US".
    public var language: String
    /// The rate the recognizer analyzes at, in Hz (input is resampled to it).
    public var sampleRate: Int

    public init(name: String, model: String, language: String, sampleRate: Int) {
        self.name = name
        self.model = model
        self.language = language
        self.sampleRate = sampleRate
    }
}

/// The payload of `ready`.
public struct ReadyInfo: Sendable, Hashable {
    /// The session id (opaque to clients).
    public var session: String
    /// Wall-clock time of the session's start, mapping the audio timeline to real time.
    public var startedAt: UTCTime
    public var engine: EngineInfo
    public var limits: SessionLimits
    /// The secret that lets the client `resume` the session after its connection drops;
    /// nil when sessions cannot be resumed.
    public var resumeToken: String?

    public init(session: String, startedAt: UTCTime, engine: EngineInfo, limits: SessionLimits,
                resumeToken: String? = nil) {
        self.session = session
        self.startedAt = startedAt
        self.engine = engine
        self.limits = limits
        self.resumeToken = resumeToken
    }
}

/// Voice activity state of a `speech` event.
public enum SpeechState: String, Sendable, Hashable {
    case started
    case ended
}

/// The `type` of a server event, and how it may be delivered.
public enum ServerEventKind: String, Sendable, Hashable, CaseIterable {
    case ready, volatile, final, speech, progress, finalized, ended, cancelled, error, joined, resumed, gap, publisher, relay

    /// A newer event of the same kind replaces an older one still unsent (volatile, progress).
    /// Every other kind must be delivered, in order.
    public var isReplaceable: Bool { self == .volatile || self == .progress }

    /// Kinds a broadcast channel relays to its viewers (volatile, final, speech).
    public var isBroadcast: Bool { self == .volatile || self == .final || self == .speech }
}

/// One event of the server → client protocol.
public enum ServerEvent: Sendable, Hashable {
    /// `{"type":"ready","seq":1,"session":…,"startedAt":…,"engine":{…},"limits":{…}}`
    case ready(ReadyInfo)
    /// The current volatile result; `includeWords` says whether to write the `words` array.
    /// An empty text clears the volatile result.
    case volatile(RecognitionResult, includeWords: Bool)
    /// A final result; never revised.
    case final(RecognitionResult, includeWords: Bool)
    /// `{"type":"speech","state":"started"|"ended","at":T}`
    case speech(SpeechState, at: Double)
    /// `{"type":"progress","received":T1,"analyzed":T2}`
    case progress(received: Double, analyzed: Double)
    /// `{"type":"finalized","through":T}`
    case finalized(through: Double)
    /// `{"type":"ended","duration":T}`
    case ended(duration: Double)
    /// `{"type":"cancelled","through":T}`
    case cancelled(through: Double)
    /// `{"type":"error","code":…,"message":…,"fatal":…}`; `fatal` is `error.code.isFatal`.
    case error(StenoError)
    /// `{"type":"error","code":"low_confidence","message":…,"fatal":false,"start":T1,"end":T2,
    /// "scores":{"ru":0.04,"en":0.02}}`: an utterance in none of the session's languages.
    case lowConfidence(TimeRange, scores: [LanguageScore])
    /// For broadcast viewers: `{"type":"joined","channel":…,"startedAt":…}`
    case joined(channel: String, startedAt: UTCTime)
    /// `{"type":"resumed","session":…,"received":R}`: the session continues on this
    /// connection, after every event the client had not received; send audio from time R.
    case resumed(session: String, received: Double)
    /// `{"type":"gap","start":T1,"end":T2}`: audio the client declared lost; no audio covers
    /// that stretch of the timeline.
    case gap(start: Double, end: Double)
    /// For broadcast viewers: `{"type":"publisher","state":"live"|"ended"|"lost","broadcast":ID,
    /// "startedAt":…}`: the channel's broadcast began, ended, or lost its publisher.
    case publisher(PublisherState, broadcast: String, startedAt: UTCTime)
    /// For broadcast viewers of a server in a cluster (`--redis`): `{"type":"relay","state":"down"|"up"}`:
    /// the server lost (or got back) its link to the other instances, so the events of a
    /// publisher on another instance stop (or come again, late ones first).
    case relay(up: Bool)

    public var kind: ServerEventKind {
        switch self {
        case .ready: return .ready
        case .volatile: return .volatile
        case .final: return .final
        case .speech: return .speech
        case .progress: return .progress
        case .finalized: return .finalized
        case .ended: return .ended
        case .cancelled: return .cancelled
        case .error, .lowConfidence: return .error
        case .joined: return .joined
        case .resumed: return .resumed
        case .gap: return .gap
        case .publisher: return .publisher
        case .relay: return .relay
        }
    }

    /// The event as a JSON text with a place for its number: `{"type":…,"seq":0,…}`, where
    /// the `0` is what the connection that delivers it replaces with the event's `seq` (see
    /// `EncodedEvent.seqDigits`). Times are written with millisecond precision, confidences
    /// with at most 3 decimals.
    public func encoded() -> EncodedEvent {
        var w = JSONWriter(capacity: 160)
        w.beginObject()
        w.field("type", kind.rawValue)
        w.key("seq")
        let digitsStart = w.bytes.count
        w.integer(0)
        let seqDigits = digitsStart..<w.bytes.count
        switch self {
        case .ready(let info):
            w.field("session", info.session)
            w.field("startedAt", info.startedAt.iso8601)
            w.key("engine")
            w.beginObject()
            w.field("name", info.engine.name)
            w.field("model", info.engine.model)
            w.field("language", info.engine.language)
            w.field("sampleRate", integer: info.engine.sampleRate)
            w.endObject()
            w.key("limits")
            w.beginObject()
            w.field("maxFrameBytes", integer: info.limits.maxFrameBytes)
            w.field("bufferSeconds", seconds: info.limits.bufferSeconds)
            w.field("maxSessionSeconds", seconds: info.limits.maxSessionSeconds)
            w.field("idleTimeoutSeconds", seconds: info.limits.idleTimeoutSeconds)
            w.field("outboundBytes", integer: info.limits.outboundBytes)
            w.field("resumeSeconds", seconds: info.limits.resumeSeconds)
            w.endObject()
            if let token = info.resumeToken { w.field("resumeToken", token) }
        case .volatile(let result, let includeWords), .final(let result, let includeWords):
            result.write(into: &w, includeWords: includeWords)
        case .speech(let state, let at):
            w.field("state", state.rawValue)
            w.field("at", seconds: at)
        case .progress(let received, let analyzed):
            w.field("received", seconds: received)
            w.field("analyzed", seconds: analyzed)
        case .finalized(let through):
            w.field("through", seconds: through)
        case .ended(let duration):
            w.field("duration", seconds: duration)
        case .cancelled(let through):
            w.field("through", seconds: through)
        case .error(let error):
            w.field("code", error.code.rawValue)
            w.field("message", error.message)
            w.field("fatal", error.code.isFatal)
        case .lowConfidence(let range, let scores):
            let listed = scores.map { "\($0.language) \(Int(($0.probability * 100).rounded())) %" }.joined(separator: ", ")
            w.field("code", ErrorCode.lowConfidence.rawValue)
            w.field("message", "speech in none of the session's languages (\(listed)): no final for it")
            w.field("fatal", false)
            w.field("start", seconds: range.start)
            w.field("end", seconds: range.end)
            w.key("scores")
            w.beginObject()
            for score in scores {
                w.key(score.language)
                w.decimal(score.probability, places: 3)
            }
            w.endObject()
        case .joined(let channel, let startedAt):
            w.field("channel", channel)
            w.field("startedAt", startedAt.iso8601)
        case .resumed(let session, let received):
            w.field("session", session)
            w.field("received", seconds: received)
        case .gap(let start, let end):
            w.field("start", seconds: start)
            w.field("end", seconds: end)
        case .publisher(let state, let broadcast, let startedAt):
            w.field("state", state.rawValue)
            w.field("broadcast", broadcast)
            w.field("startedAt", startedAt.iso8601)
        case .relay(let up):
            w.field("state", up ? "up" : "down")
        }
        w.endObject()
        var errorCode: ErrorCode?
        var result: RecognitionResult?
        switch self {
        case .error(let error): errorCode = error.code
        case .volatile(let carried, _), .final(let carried, _): result = carried
        default: break
        }
        return EncodedEvent(kind: kind, seq: 0, bytes: w.bytes, seqDigits: seqDigits, errorCode: errorCode, result: result,
                            event: self)
    }

    /// The event numbered `seq`, as a client receives it (tests, and local sessions, which
    /// are their own client).
    public func encoded(seq: UInt64) -> EncodedEvent { encoded().numbered(seq) }
}

/// An event encoded for the wire: the JSON bytes plus what the outbound queue needs to know.
///
/// Events are numbered by whoever delivers them, in the order the client receives them: the
/// server's connection numbers each event as it writes it (so an unsent `volatile` replaced by
/// a newer one leaves no gap), a local session as it hands them out. Until then `bytes` carry
/// `"seq":0`; `seqDigits` says where that number is, so it is replaced without parsing.
///
/// Guarantees: `bytes` is one JSON object, UTF-8, beginning `{"type":"<kind>","seq":<seq>`.
public struct EncodedEvent: Sendable, Hashable {
    public let kind: ServerEventKind
    /// The number written in `bytes`; 0 until the event is numbered.
    public let seq: UInt64
    /// The UTF-8 JSON text, ready for a WebSocket text frame.
    public let bytes: [UInt8]
    /// Where the digits of `seq` are in `bytes`.
    public let seqDigits: Range<Int>
    /// For an `error` event, its code (so the server can count errors without parsing).
    public let errorCode: ErrorCode?
    /// For a `volatile` or `final` event, the result it carries, with its words even when
    /// `bytes` leave them out: whoever keeps finals from the events (a channel's backfill and
    /// captions) keeps the very one this event is, without parsing it back, and without
    /// asking the session's transcript, which may have gone further by the time the event is
    /// delivered (finals reported together are all assembled before the first is sent).
    public let result: RecognitionResult?
    /// The event itself, typed: what another route's codec writes in its own protocol
    /// (Deepgram's `Results`); nil for an event made from bytes alone.
    public let event: ServerEvent?

    init(kind: ServerEventKind, seq: UInt64, bytes: [UInt8], seqDigits: Range<Int>, errorCode: ErrorCode? = nil,
         result: RecognitionResult? = nil, event: ServerEvent? = nil) {
        self.kind = kind
        self.seq = seq
        self.bytes = bytes
        self.seqDigits = seqDigits
        self.errorCode = errorCode
        self.result = result
        self.event = event
    }

    /// The JSON text as a String.
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Whether a newer unsent event of the same `kind` may replace this one (volatile, progress).
    /// Every other event must be delivered.
    public var isReplaceable: Bool { kind.isReplaceable }

    /// How an outbound queue treats it: a newer event of its kind replaces it, or it must go.
    public var delivery: OutboundDelivery { isReplaceable ? .replaceable(key: kind.rawValue) : .mustDeliver }

    /// The same event carrying `seq`, the rest of its bytes unchanged.
    public func numbered(_ seq: UInt64) -> EncodedEvent {
        let (out, slot) = SeqSlot(seqDigits).numbered(bytes, seq: seq)
        return EncodedEvent(kind: kind, seq: seq, bytes: out, seqDigits: slot.digits, errorCode: errorCode, result: result,
                            event: event)
    }
}
