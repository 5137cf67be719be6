// Reading a server event back from its JSON, beside the writing in ServerEvent.swift: what a
// client (`steno send`, `steno listen`) and the channels' relay between instances make of an
// event, so that one type owns both directions. The rule is the results' (ResultJSON.swift):
// an event is taken whole or not at all.

extension ServerEvent {
    /// The event `object` is, as `encoded()` wrote it (its `seq` aside); nil when it is not one,
    /// or has a field of the wrong type. An `error` with a code this version does not know is
    /// nil too: the caller still has the object.
    public init?(wire object: JSONObject) {
        guard case .string(let type)? = object["type"], let kind = ServerEventKind(rawValue: type) else { return nil }
        func number(_ key: String) -> Double? { if case .number(let n)? = object[key], n.isFinite { n } else { nil } }
        func string(_ key: String) -> String? { if case .string(let s)? = object[key] { s } else { nil } }
        func time(_ key: String) -> UTCTime? { string(key).flatMap { UTCTime(iso8601: $0) } }
        switch kind {
        case .ready:
            guard let session = string("session"), let startedAt = time("startedAt"),
                  case .object(let engine)? = object["engine"], case .object(let limits)? = object["limits"],
                  case .string(let name)? = engine["name"], case .string(let model)? = engine["model"],
                  case .string(let language)? = engine["language"], case .number(let rate)? = engine["sampleRate"],
                  let announced = SessionLimits(wire: limits) else { return nil }
            self = .ready(ReadyInfo(session: session, startedAt: startedAt,
                                    engine: EngineInfo(name: name, model: model, language: language, sampleRate: Int(rate)),
                                    limits: announced, resumeToken: string("resumeToken")))
        case .volatile, .final:
            guard let result = RecognitionResult(wire: object) else { return nil }
            let words = object["words"] != nil
            self = kind == .final ? .final(result, includeWords: words) : .volatile(result, includeWords: words)
        case .speech:
            guard let state = string("state").flatMap(SpeechState.init(rawValue:)), let at = number("at") else { return nil }
            self = .speech(state, at: at)
        case .progress:
            guard let received = number("received"), let analyzed = number("analyzed") else { return nil }
            self = .progress(received: received, analyzed: analyzed)
        case .finalized:
            guard let through = number("through") else { return nil }
            self = .finalized(through: through)
        case .ended:
            guard let duration = number("duration") else { return nil }
            self = .ended(duration: duration)
        case .cancelled:
            guard let through = number("through") else { return nil }
            self = .cancelled(through: through)
        case .error:
            guard let code = string("code").flatMap(ErrorCode.init(rawValue:)), let message = string("message") else { return nil }
            if code == .lowConfidence, let start = number("start"), let end = number("end"),
               case .object(let scores)? = object["scores"] {
                var listed: [LanguageScore] = []
                for language in scores.keys {
                    guard case .number(let p)? = scores[language] else { return nil }
                    listed.append(LanguageScore(language: language, probability: p))
                }
                self = .lowConfidence(TimeRange(start: start, end: end), scores: listed)
            } else {
                self = .error(StenoError(code, message))
            }
        case .joined:
            guard let channel = string("channel"), let startedAt = time("startedAt") else { return nil }
            self = .joined(channel: channel, startedAt: startedAt)
        case .resumed:
            guard let session = string("session"), let received = number("received") else { return nil }
            self = .resumed(session: session, received: received)
        case .gap:
            guard let start = number("start"), let end = number("end") else { return nil }
            self = .gap(start: start, end: end)
        case .publisher:
            guard let state = string("state").flatMap(PublisherState.init(rawValue:)), let broadcast = string("broadcast"),
                  let startedAt = time("startedAt") else { return nil }
            self = .publisher(state, broadcast: broadcast, startedAt: startedAt)
        case .relay:
            guard let state = string("state"), state == "up" || state == "down" else { return nil }
            self = .relay(up: state == "up")
        }
    }
}

extension SessionLimits {
    /// The limits `ready` announces (the rest keep their defaults).
    init?(wire object: JSONObject) {
        func number(_ key: String) -> Double? { if case .number(let n)? = object[key], n.isFinite, n >= 0 { n } else { nil } }
        guard let frame = number("maxFrameBytes"), let buffer = number("bufferSeconds"),
              let session = number("maxSessionSeconds"), let idle = number("idleTimeoutSeconds"),
              let outbound = number("outboundBytes"), let resume = number("resumeSeconds"),
              frame < 1e15, outbound < 1e15 else { return nil }
        self.init(maxFrameBytes: Int(frame), bufferSeconds: buffer, maxSessionSeconds: session, idleTimeoutSeconds: idle,
                  outboundBytes: Int(outbound), resumeSeconds: resume)
    }
}
