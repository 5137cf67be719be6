// What a session is configured with: the models a server has (`ServedModel`), its limits,
// the progress interval, and the defaults for what `start` does not say
// (`SessionConfiguration`). The machine that uses them is in Session.swift.

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
