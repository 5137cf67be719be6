// What a session is configured with: the models a server has (`ServedModel`), its limits
// (`SessionLimits`, which `ready` announces), the progress interval, and the defaults for
// what `start` does not say (`SessionConfiguration`). The machine that uses them is in
// Session.swift.

/// A model a server has, as a session chooses it (`start`'s "model" or "language").
public struct ServedModel: Sendable, Hashable {
    public var engine: EngineInfo
    /// The acoustic model's phone names, to check a session's pronunciations against before
    /// it starts; empty: not checked.
    public var phones: Set<String>

    public init(engine: EngineInfo, phones: Set<String> = []) {
        self.engine = engine
        self.phones = phones
    }
}

/// The limits a session runs under; announced in `ready` and enforced by the server.
///
/// Wire shape: `{"maxFrameBytes":65536,"bufferSeconds":10,"maxSessionSeconds":14400,
/// "idleTimeoutSeconds":30,"outboundBytes":1048576,"resumeSeconds":30}`. A value of 0 for `maxSessionSeconds`
/// or `idleTimeoutSeconds` means "no limit".
public struct SessionLimits: Sendable, Hashable {
    /// Largest text or binary frame accepted; bigger → `too_large` (close 1009).
    public var maxFrameBytes: Int
    /// Seconds of audio received but not yet analyzed the server holds before it stops reading.
    public var bufferSeconds: Double
    /// Longest session, in wall-clock seconds from `start`; then it is finalized and
    /// closed with `session_limit` (4009). 0 = unlimited.
    public var maxSessionSeconds: Double
    /// Seconds without any client frame (and without analysis progress) before `idle` (4010).
    /// 0 = never.
    public var idleTimeoutSeconds: Double
    /// Bytes of unsent events a connection may hold before `slow_consumer` (4008).
    public var outboundBytes: Int
    /// Seconds a session whose connection dropped (without `end`) waits for the client to
    /// `resume` it, analyzing what it had and keeping the results; then it is finalized and
    /// closed. 0 = no resume.
    public var resumeSeconds: Double
    /// Seconds a connection may take to send `start` (or `resume`) after it opened; then it is
    /// closed with `idle` (4010), so that connections that never start hold nothing. 0 = no
    /// limit (then `idleTimeoutSeconds` applies). Not announced: it is over by `ready`.
    public var startTimeoutSeconds: Double
    /// Seconds without audio in the middle of speech (the client stalled, its connection
    /// dropped) after which what was heard is finalized, so the session stops holding a
    /// shared recognizer. 0 = never. Not announced.
    public var stallSeconds: Double

    public init(maxFrameBytes: Int = 64 * 1024, bufferSeconds: Double = 10,
                maxSessionSeconds: Double = 4 * 3600, idleTimeoutSeconds: Double = 30,
                outboundBytes: Int = 1 << 20, resumeSeconds: Double = 30, startTimeoutSeconds: Double = 10,
                stallSeconds: Double = 2) {
        self.stallSeconds = stallSeconds
        self.maxFrameBytes = maxFrameBytes
        self.bufferSeconds = bufferSeconds
        self.maxSessionSeconds = maxSessionSeconds
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.outboundBytes = outboundBytes
        self.resumeSeconds = resumeSeconds
        self.startTimeoutSeconds = startTimeoutSeconds
    }
}

/// What the server configures a session with.
public struct SessionConfiguration: Sendable, Hashable {
    /// The default model (the first of `models`).
    public var engine: EngineInfo {
        get { models[0].engine }
        set { models[0].engine = newValue }
    }
    /// Every model the server has, the default first (never empty).
    public var models: [ServedModel]
    public var limits: SessionLimits
    /// Seconds between `progress` events while audio flows (docs/protocol.md: at least once a second).
    /// The server should tick several times per interval.
    public var progressInterval: Double
    /// Duration counted for an Opus packet whose header is unreadable before any good packet
    /// arrived, in 48 kHz samples (960 = 20 ms).
    public var defaultOpusPacketSamples: Int
    /// What results do with profanity when `start` does not say (`steno serve --profanity`).
    public var profanity = ProfanityMode.serverDefault

    public init(engine: EngineInfo, limits: SessionLimits = SessionLimits(),
                progressInterval: Double = 1.0, defaultOpusPacketSamples: Int = 960) {
        self.models = [ServedModel(engine: engine)]
        self.limits = limits
        self.progressInterval = progressInterval
        self.defaultOpusPacketSamples = defaultOpusPacketSamples
    }
}
