import StenoCore

/// What a sender knows of the session its audio goes to, kept across connections: enough to
/// resume it on a new connection while the server still holds it.
struct SessionRecord: Sendable, Equatable {
    var id: String
    /// From `ready` (servers that can resume sessions); nil: this session cannot be resumed.
    var resumeToken: String?
    /// The token as `ready` gave it, kept when the session can no longer be resumed: the next
    /// session `continues` this one with it, which lets it take this one's channel over.
    var continuation: StartRequest.Continuation?
    /// How long the server holds a session whose connection dropped (`ready.limits.resumeSeconds`).
    var resumeSeconds: Double?
    /// The last event `seq` received.
    var lastSeq: Int
    /// When its connection was lost (monotonic seconds); nil while connected.
    var lostAt: Double?

    /// A server that resumes sessions also takes `gap` messages.
    var takesGaps: Bool { resumeToken != nil }

    /// How a connection opens.
    enum Opening: Equatable, Sendable {
        /// A new session: `start`.
        case start
        /// `{"type":"resume","session":ID,"resumeToken":T,"after":SEQ}`: the server replays what
        /// came after SEQ, then says `resumed` with how much audio it has.
        case resume(session: String, token: String, after: Int)
    }

    /// The one place that chooses between `start` and `resume`: resume while the server
    /// still holds the session (it said it can, and the connection was lost less than
    /// `resumeSeconds` ago), start a new one otherwise.
    static func opening(for record: SessionRecord?, now: Double) -> Opening {
        guard let record, let token = record.resumeToken, let window = record.resumeSeconds, window > 0 else {
            return .start
        }
        if let lost = record.lostAt, now - lost >= window { return .start }
        return .resume(session: record.id, token: token, after: record.lastSeq)
    }

    /// The session `ready` announced.
    init?(ready: ServerMessage) {
        guard ready.type == "ready", let id = ready.string("session") else { return nil }
        self.id = id
        resumeToken = ready.string("resumeToken")
        continuation = resumeToken.map { StartRequest.Continuation(session: id, resumeToken: $0) }
        if case .number(let seconds)? = ready.objectField("limits")?["resumeSeconds"], seconds.isFinite {
            resumeSeconds = seconds
        }
        lastSeq = ready.seq ?? 1
    }

    init(id: String, resumeToken: String? = nil, resumeSeconds: Double? = nil, lastSeq: Int = 1, lostAt: Double? = nil) {
        self.id = id
        self.resumeToken = resumeToken
        self.resumeSeconds = resumeSeconds
        self.lastSeq = lastSeq
        self.lostAt = lostAt
    }
}

/// The client's messages, as JSON text.
enum ClientMessages {
    // `start` is StenoCore's `ClientMessage.startText`, shared with `steno transcribe`.

    static func resume(session: String, token: String, after seq: Int) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.field("type", "resume")
        w.field("session", session)
        w.field("resumeToken", token)
        w.field("after", integer: seq)
        w.endObject()
        return w.text
    }

    static func gap(_ seconds: Double) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.field("type", "gap")
        w.field("duration", seconds: seconds)
        w.endObject()
        return w.text
    }

    /// `{"type":"silence","duration":D}`, D exact (not rounded to milliseconds: the server
    /// counts it in samples, and the audio after it must stay on the whole input's grid).
    static func silence(_ seconds: Double) -> String {
        var w = JSONWriter()
        w.beginObject()
        w.field("type", "silence")
        w.key("duration")
        w.number(seconds)
        w.endObject()
        return w.text
    }

    static let end = #"{"type":"end"}"#
}
