import StenoCore

/// Several models served side by side (`steno serve --model` given more than once): one engine
/// per model, a session's recognizer made by the one its `RecognizerOptions.model` names (the
/// first when it names none). For pocketsphinx the engines share one `DecoderBudget`, so the
/// decoders of all models together stay within `--recognizers`.
public final class ModelSet: SpeechEngine, Sendable {
    public let engines: [any SpeechEngine]
    private let capacity: Int?

    /// `engines` must not be empty and their model names must differ (the caller checks:
    /// `ModelSet.check`). `capacity`: the shared budget's total, for `load` (nil: the sum of
    /// the engines' capacities).
    public init(_ engines: [any SpeechEngine], capacity: Int? = nil) {
        precondition(!engines.isEmpty, "a model set needs at least one engine")
        self.engines = engines
        self.capacity = capacity
    }

    /// Why these model names cannot be served together (a name given twice), or nil.
    public static func check(names: [String]) -> String? {
        var seen: Set<String> = []
        for name in names where !seen.insert(name).inserted {
            return "two models are named \"\(name)\": name one of them (--model NAME=DIR)"
        }
        return nil
    }

    public var info: SpeechEngineInfo { engines[0].info }

    public var models: [SpeechModelInfo] { engines.flatMap(\.models) }

    /// Ready while the default engine is: another model's worker restarting (the multilingual
    /// one) keeps its own sessions waiting, and must not turn the instance's other sessions away.
    public var isReady: Bool { engines[0].isReady }

    /// Every engine's worker process as one (`EngineWorkerStats.combined`); nil when none has one.
    public var workerStats: EngineWorkerStats? { EngineWorkerStats.combined(engines.compactMap(\.workerStats)) }

    public func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        guard let name = options.model else { return try engines[0].makeRecognizer(options: options, wake: wake) }
        guard let engine = engines.first(where: { $0.models.contains { $0.info.model == name } }) else {
            throw StenoError(.badMessage, "model \"\(clippedForError(name))\" is not available")
        }
        return try engine.makeRecognizer(options: options, wake: wake)
    }

    /// Prepares the default model's decoders (the others are made when their sessions speak).
    public func prepare(sessions: Int) throws(StenoError) {
        try engines[0].prepare(sessions: sessions)
    }

    public var load: RecognizerLoad {
        var busy = 0
        var waiting = 0
        var made = 0
        var total = 0
        for engine in engines {
            let load = engine.load
            busy += load.busy
            waiting += load.waiting
            made += load.made
            total = load.capacity > Int.max - total ? Int.max : total + load.capacity  // Int.max: unbounded
        }
        return RecognizerLoad(capacity: capacity ?? total, busy: busy, waiting: waiting, made: made)
    }
}
