import StenoCore

/// What a speech engine is, for the `ready` message, logs and metrics.
public struct SpeechEngineInfo: Sendable, Hashable, CustomStringConvertible {
    /// Recognizer name, e.g. "pocketsphinx".
    public var name: String
    /// Engine version, e.g. "5prealpha".
    public var version: String
    /// Model name, e.g. "en-us".
    public var model: String
    /// The language the model recognizes, as a BCP 47 tag, e.g. "en-US".
    public var language: String
    /// The rate recognizers want their input at, in Hz (mono).
    public var sampleRate: Int

    public init(name: String, version: String, model: String, language: String, sampleRate: Int) {
        self.name = name
        self.version = version
        self.model = model
        self.language = language
        self.sampleRate = sampleRate
    }

    public var description: String { "\(name) \(version), model \(model) (\(language)), \(sampleRate) Hz" }

    /// What `ready.engine` says of it (everything but the version).
    public var announced: EngineInfo {
        EngineInfo(name: name, model: model, language: language, sampleRate: sampleRate)
    }
}

/// Per-session choices a server passes when it makes a recognizer.
public struct RecognizerOptions: Sendable, Hashable {
    /// Report `.volatile` results (volatile results). Off saves a little CPU.
    public var volatileResults: Bool
    /// Keep a decoder from the first utterance to the end of the session instead of giving it
    /// back after each one: the design before shared decoders, kept for comparison in the
    /// benchmarks (each session then costs a decoder while connected).
    public var keepsDecoder: Bool
    /// Force a final after this many seconds of one utterance; nil keeps the engine's default.
    public var maxUtteranceSeconds: Double?

    /// The session's own phrases and pronunciations; nil: the model's vocabulary alone.
    public var vocabulary: Vocabulary?
    /// How many alternative texts (n-best) each final carries; 0: none.
    public var alternatives: Int
    /// The model to recognize with, by name (`SpeechModelInfo.info.model`); nil: the engine's
    /// default (its first).
    public var model: String?
    /// The language the session said it speaks (BCP 47, `start`'s `language`); nil: not said.
    /// A multilingual model hears it in that language (or detects one without it).
    public var language: String?
    /// Auto, lanes, translation (`start`'s); nil: none. Only a multilingual model is given one.
    public var languagePlan: LanguagePlan?
    /// An upload's session (`StartRequest.background`): its work waits behind live sessions'.
    public var background = false

    public init(volatileResults: Bool = true, maxUtteranceSeconds: Double? = nil, keepsDecoder: Bool = false,
                vocabulary: Vocabulary? = nil, alternatives: Int = 0, model: String? = nil, language: String? = nil) {
        self.model = model
        self.language = language
        self.vocabulary = vocabulary
        self.alternatives = alternatives
        self.keepsDecoder = keepsDecoder
        self.volatileResults = volatileResults
        self.maxUtteranceSeconds = maxUtteranceSeconds
    }
}

/// One session's streaming recognizer.
///
/// A recognizer is used by one session, from one thread at a time (it is not `Sendable`; a
/// session may move it between worker threads as long as calls never overlap). It takes mono
/// samples at `sampleRate` as `Float` in -1...1 and reports `TranscriberEvent`s whose times
/// are seconds on its own input timeline: 0 is the first sample ever passed to `accept`, and
/// time advances only with samples fed.
///
/// Results arrive in order: `.volatile` results replace each other until a `.final` covers
/// them; finals never overlap and their ranges increase; every word lies inside its result's
/// range. `.speechStarted`/`.speechEnded` alternate, starting with `.speechStarted`.
///
/// After `finish()` or `cancel()` the recognizer has given its engine resources back and
/// refuses more audio (`accept` throws `internal`). Dropping a recognizer without either
/// behaves like `cancel()`.
///
/// Engines that share their decoders among sessions may have none free when speech starts:
/// the recognizer then keeps what it was given, reports nothing more and `isWaiting` is true,
/// until the `wake` it was made with is called (from any thread); then `proceed()` goes on.
/// While it waits, `accept` only keeps the audio; `endUtterance` and `finish` are done once it
/// can go on (their events come from a later call).
public protocol SpeechRecognizer: AnyObject {
    /// The engine behind this recognizer.
    var info: SpeechEngineInfo { get }
    /// The rate `accept` expects, in Hz.
    var sampleRate: Int { get }
    /// Seconds of audio analyzed so far, on its input timeline (at most what was passed to
    /// `accept` and `skipSilence`; the rest waits in a small internal buffer until a full
    /// analysis block has arrived, or `endUtterance`/`finish`).
    var analyzedSeconds: Double { get }

    /// Feeds mono samples in -1...1 (values outside are clipped, NaN is read as 0). The events
    /// cannot depend on how the audio is cut into calls.
    func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent]

    /// Finalize: the utterance in progress, with every sample received so far, becomes a final
    /// now (if it has any words). Audio after this starts a new utterance.
    func endUtterance() throws(StenoError) -> [TranscriberEvent]

    /// End of input: finalizes like `endUtterance`, closes voice activity (`.speechEnded` if
    /// speech was going on), and releases the engine resources.
    func finish() throws(StenoError) -> [TranscriberEvent]

    /// Discards whatever is not final yet, reports nothing more, and releases the engine
    /// resources. Safe to call more than once.
    func cancel()

    /// Whether it waits for a shared decoder (see above).
    var isWaiting: Bool { get }

    /// Whether results it has asked for elsewhere are still to come (an engine's worker
    /// process hears its finals): the session's finalize and `end` are done only once they
    /// have, and `wake` says when they come. Unlike `isWaiting`, it goes on taking audio
    /// meanwhile. The default: `isWaiting`.
    var owesResults: Bool { get }

    /// Goes on after `wake`: analyzes what it kept, as far as it can.
    func proceed() throws(StenoError) -> [TranscriberEvent]

    /// `samples` of silence the client left out (it declared them instead of sending them):
    /// the utterance in progress ends, and the input timeline moves on by that much.
    func skipSilence(_ samples: Int) throws(StenoError) -> [TranscriberEvent]

    /// What the session should be told about how its options were taken (non-fatal
    /// `bad_message`s, e.g. a phrase word left out for want of a pronunciation); read once,
    /// after the recognizer was made.
    var notices: [StenoError] { get }

    /// How the last utterance it closed went (where its end was seen, what ending it cost),
    /// for the latency breakdown of `steno-bench latency`; nil if the engine does not say.
    var lastUtteranceTiming: UtteranceTiming? { get }

    /// Samples `accept` still needs before the next analysis block is complete (and with it
    /// the next check for the end of an utterance); nil if the engine does not analyze in
    /// blocks, waits for a decoder, or is done. A session hands audio over when this much has
    /// come, so that a block is analyzed as soon as its last sample is in.
    var samplesToNextBlock: Int? { get }

    /// CPU seconds spent for it outside the caller's thread so far: in an engine's worker
    /// process (its share of each batch). 0 for an engine that does all its work in `accept`
    /// and the rest, whose time the session's lane measures itself. Admission adds it to the
    /// session's demand.
    var engineSeconds: Double { get }
}

extension SpeechRecognizer {
    public var owesResults: Bool { isWaiting }
    public var engineSeconds: Double { 0 }
    public var notices: [StenoError] { [] }
    public var lastUtteranceTiming: UtteranceTiming? { nil }
    public var samplesToNextBlock: Int? { nil }
}

extension SpeechRecognizer {
    /// Feeds an array of samples (see `accept(_:)`).
    public func accept(_ samples: [Float]) throws(StenoError) -> [TranscriberEvent] {
        // withUnsafeBufferPointer's rethrows is untyped; keep the typed error by hand.
        var result: Result<[TranscriberEvent], StenoError> = .success([])
        samples.withUnsafeBufferPointer { buffer in
            do throws(StenoError) {
                result = .success(try accept(buffer))
            } catch {
                result = .failure(error)
            }
        }
        return try result.get()
    }
}

/// One model an engine recognizes with: what it is, the phones its pronunciations may use,
/// and the files it was loaded from (`/v1/models`).
public struct SpeechModelInfo: Sendable, Hashable {
    public struct Source: Sendable, Hashable {
        /// What the file is: "acousticModel", "languageModel", "dictionary".
        public var name: String
        public var path: String

        public init(name: String, path: String) {
            self.name = name
            self.path = path
        }
    }

    public var info: SpeechEngineInfo
    /// The acoustic model's phones (empty: pronunciations are not checked against them).
    public var phones: Set<String>
    public var sources: [Source]
    /// The languages it recognizes, as BCP 47 primary subtags ("en", "it", …), in the model's
    /// order; nil: its own language's (`info.language`).
    public var languages: [String]

    public init(info: SpeechEngineInfo, phones: Set<String> = [], sources: [Source] = [], languages: [String]? = nil) {
        self.info = info
        self.phones = phones
        self.sources = sources
        self.languages = languages ?? [LanguageTag.primary(info.language)]
    }

    /// How a session chooses it (StenoCore's `SessionMachine`).
    public var served: ServedModel { ServedModel(engine: info.announced, phones: phones) }
}

/// How busy an engine's shared decoders are: what admission looks at.
public struct RecognizerLoad: Sendable, Hashable {
    /// The most utterances it recognizes at once.
    public var capacity: Int
    /// Utterances being recognized now.
    public var busy: Int
    /// Sessions with speech to recognize that wait for a decoder.
    public var waiting: Int
    /// Decoders that exist now, up to `capacity`: those made at start (`prepare`), and more
    /// as speech needs them, each ≈0.5 s of CPU taken from the sessions (a benchmark waits
    /// for all of them).
    public var made: Int

    public init(capacity: Int, busy: Int, waiting: Int, made: Int = 0) {
        self.capacity = capacity
        self.busy = busy
        self.waiting = waiting
        self.made = made
    }
}

/// A speech engine: loads models and makes recognizers, one per session.
///
/// `Sendable`: a server keeps one engine and calls `makeRecognizer` from any worker thread,
/// concurrently. Making a recognizer may take a while (pocketsphinx: ≈0.5 s if no prepared
/// decoder is waiting), so call it off the network thread.
public protocol SpeechEngine: Sendable {
    var info: SpeechEngineInfo { get }

    /// A recognizer for one new session. `wake` is called, from any thread, when a recognizer
    /// that waited for a shared decoder can go on (see `SpeechRecognizer.isWaiting`).
    func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer

    /// Loads models ahead of time so that `sessions` new sessions can start speaking without
    /// delay, now and later (pocketsphinx: that many decoders are kept idle in the pool, made
    /// now and again as they are lent). Blocking; a no-op for engines with nothing to prepare.
    func prepare(sessions: Int) throws(StenoError)

    /// How busy its shared decoders are now.
    var load: RecognizerLoad { get }

    /// The models it has, the default first (`RecognizerOptions.model` chooses one).
    var models: [SpeechModelInfo] { get }

    /// Whether it recognizes now (`/readyz`): false while a worker process it needs restarts.
    var isReady: Bool { get }

    /// Its worker process, for `/metrics`; nil for an engine in this process.
    var workerStats: EngineWorkerStats? { get }
}

/// An engine's worker process, as `/metrics` shows it.
public struct EngineWorkerStats: Sendable, Hashable {
    /// A worker has its model loaded and serves.
    public var ready: Bool
    /// Times it was started again after it died.
    public var restarts: Int
    /// Requests sent and not answered.
    public var pending: Int
    /// CPU seconds of the worker running now (user and system), 0 if unknown.
    public var cpuSeconds: Double

    public init(ready: Bool, restarts: Int, pending: Int, cpuSeconds: Double) {
        self.ready = ready
        self.restarts = restarts
        self.pending = pending
        self.cpuSeconds = cpuSeconds
    }

    /// Several engines' workers as `/metrics` shows them, in one series each: ready while every
    /// one of them is, and the restarts, pending requests and CPU seconds of all of them added up
    /// (for one worker, its own); nil for none.
    public static func combined(_ workers: [EngineWorkerStats]) -> EngineWorkerStats? {
        guard !workers.isEmpty else { return nil }
        return EngineWorkerStats(ready: workers.allSatisfy(\.ready), restarts: workers.reduce(0) { $0 + $1.restarts },
                                 pending: workers.reduce(0) { $0 + $1.pending },
                                 cpuSeconds: workers.reduce(0) { $0 + $1.cpuSeconds })
    }
}

extension SpeechEngine {
    /// A recognizer whose caller never waits for it (one session at a time, or a test).
    public func makeRecognizer(options: RecognizerOptions = RecognizerOptions()) throws(StenoError) -> any SpeechRecognizer {
        try makeRecognizer(options: options, wake: {})
    }

    public func prepare(sessions: Int) throws(StenoError) {}

    public var models: [SpeechModelInfo] { [SpeechModelInfo(info: info)] }

    /// How sessions choose among its models (the session configuration's `models`).
    public var servedModels: [ServedModel] { models.map(\.served) }

    public var isReady: Bool { true }

    public var workerStats: EngineWorkerStats? { nil }

    /// An engine without shared decoders is never busy.
    public var load: RecognizerLoad { RecognizerLoad(capacity: Int.max, busy: 0, waiting: 0) }
}
