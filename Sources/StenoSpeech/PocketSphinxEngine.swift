import CPocketSphinx
import CPocketSphinxShims
import Dispatch
import Foundation
import StenoCore
import StenoSystem

/// The pocketsphinx speech engine: the model configuration and the shared decoders.
///
/// Making a decoder (`ps_init`) costs ≈0.5 s of CPU and ≈95 MB, and the acoustic model cannot
/// be shared between decoders in this pocketsphinx. So decoders are not per session: the engine
/// keeps a pool of at most `configuration.recognizers`, and a session's recognizer borrows one
/// for each utterance (see `PocketSphinxRecognizer` and `DecoderPool`). A recognizer itself is
/// light (a front end and a cepstral mean, ≈20 kB) and quick to make.
///
/// Thread-safe: recognizers may be made from any thread, concurrently.
public final class PocketSphinxEngine: SpeechEngine, Sendable {
    public let configuration: PocketSphinxConfiguration
    public let info: SpeechEngineInfo
    private let pool: DecoderPool
    private let shape: DecoderShape
    private let lexicon: PocketSphinxLexicon
    private let logmath: LogmathHandle

    /// The acoustic model's phones, which pronunciations may use.
    public var phones: Set<String> { lexicon.phones }

    /// Validates the configuration and loads the first decoder (and `preparedRecognizers` in
    /// all), so that a bad model path fails here, with pocketsphinx's reason, rather than in
    /// the first session. Blocking (≈0.5 s per decoder).
    /// `budget`: shared with the engines of other models, whose decoders count against the
    /// same total (`configuration.recognizers` is then not used); nil: a budget of its own of
    /// `configuration.recognizers`.
    public init(configuration: PocketSphinxConfiguration = PocketSphinxConfiguration(),
                budget: DecoderBudget? = nil) throws(StenoError) {
        try configuration.validate()
        for (what, path) in [("acoustic model", configuration.resolvedAcousticModel),
                             ("language model", configuration.resolvedLanguageModel),
                             ("dictionary", configuration.resolvedDictionary)]
        where !FileManager.default.fileExists(atPath: path) {
            throw StenoError(.internal, "pocketsphinx \(what) not found: \(path)")
        }
        self.configuration = configuration
        self.info = SpeechEngineInfo(
            name: "pocketsphinx", version: "5prealpha", model: configuration.modelName,
            language: configuration.language, sampleRate: PocketSphinxRecognizer.sampleRate)
        let first = try PocketSphinxDecoder(arguments: configuration.decoderArguments)
        self.shape = DecoderShape(first)
        self.lexicon = PocketSphinxLexicon(decoder: first, configuration: configuration)
        self.logmath = LogmathHandle(first.logmathPointer)
        self.pool = DecoderPool(arguments: configuration.decoderArguments, capacity: configuration.recognizers,
                                budget: budget)
        pool.adopt(first)
        try pool.prepare(count: configuration.preparedRecognizers)
    }

    public func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        try makePocketSphinxRecognizer(options: options, wake: wake)
    }

    public var models: [SpeechModelInfo] {
        [SpeechModelInfo(info: info, phones: lexicon.phones, sources: [
            .init(name: "acousticModel", path: configuration.resolvedAcousticModel),
            .init(name: "languageModel", path: configuration.resolvedLanguageModel),
            .init(name: "dictionary", path: configuration.resolvedDictionary),
        ])]
    }

    /// `makeRecognizer` with the concrete type (for tests and benchmarks).
    public func makePocketSphinxRecognizer(options: RecognizerOptions = RecognizerOptions(),
                                           wake: @escaping @Sendable () -> Void = {}) throws(StenoError) -> PocketSphinxRecognizer {
        let maxSeconds = options.maxUtteranceSeconds ?? configuration.maxUtteranceSeconds
        guard maxSeconds > 0, maxSeconds.isFinite else {
            throw StenoError(.internal, "maxUtteranceSeconds must be a positive number of seconds, not \(maxSeconds)")
        }
        var vocabulary: SessionVocabulary?
        var notices: [StenoError] = []
        if let asked = options.vocabulary, !asked.isEmpty {
            (vocabulary, notices) = try SessionVocabulary.make(asked, lexicon: lexicon, config: shape.config, logmath: logmath.pointer)
        }
        let frontEnd = try shape.makeFrontEnd()
        return PocketSphinxRecognizer(
            pool: pool, shape: shape, frontEnd: frontEnd, info: info,
            blockSamples: configuration.blockSamples,
            maxUtteranceSeconds: maxSeconds,
            volatileResults: options.volatileResults,
            keepsDecoder: options.keepsDecoder,
            vocabulary: vocabulary,
            notices: notices,
            alternatives: max(0, options.alternatives),
            endpointing: configuration.endpointing,
            wake: wake)
    }

    /// Issue 14's other way of adding words, measured against the phrases in `steno-bench
    /// phrases` and not used by sessions: each word of `vocabulary` the language model lacks
    /// is added to the model's own LM of every decoder of this engine, with `ps_add_word`
    /// (phones from the dictionary, or from the letter-to-sound rules as a session's phrases
    /// get them; a word the dictionary has gets the LM half of `ps_add_word`, which refuses it
    /// whole). For good: every later session of the engine hears them, and this sphinxbase
    /// cannot take them out. Words the LM has are left as they are (`ps_add_word` can only
    /// add a word, with the probability sphinxbase gives any new one), and the vocabulary's
    /// sequences, boost and pronunciations are not used. Only on an engine whose every decoder is made and
    /// idle (e.g. `recognizers: 1`); the engine's phrase look-ups still take the added words
    /// for unknown ones.
    public func addWordsToLanguageModel(_ vocabulary: Vocabulary) throws(StenoError) -> LanguageModelAdditions {
        guard let decoders = pool.takeEvery() else {
            throw StenoError(.internal, "words are added to the language model only while every decoder of the engine is made and idle")
        }
        defer { for decoder in decoders { pool.giveBack(decoder) } }
        var result = LanguageModelAdditions()
        var unknown: [String] = []
        for key in vocabulary.spellings.keys.sorted() {
            if lexicon.languageModelWords.contains(key) {
                result.known.append(key)
            } else if lexicon.pronunciations(of: key).isEmpty {
                unknown.append(key)
            } else {
                result.fromDictionary.append(key)
            }
        }
        let found = lexicon.newWordPronunciations(unknown)
        var phones: [String: String] = [:]
        for key in unknown {
            guard let list = found[key], lexicon.knows(phones: list) else {
                result.unpronounced.append(key)
                continue
            }
            phones[key] = list.joined(separator: " ")
            result.fromLetterToSound.append(key)
        }
        for decoder in decoders {
            for key in result.fromDictionary { try decoder.addToLanguageModel(key, phones: nil) }
            for key in result.fromLetterToSound { try decoder.addToLanguageModel(key, phones: phones[key]) }
        }
        return result
    }

    /// Keeps `sessions` idle decoders ready ahead of speech (within `recognizers`): makes them
    /// now, blocking (≈0.5 s each), and more in the background as they are lent. A server
    /// calls it at start-up, off the network thread.
    public func prepare(sessions: Int) throws(StenoError) {
        try pool.keepReady(sessions)
    }

    /// A standalone speech detector with this engine's voice activity settings (no model: cheap
    /// to make and to run); `settling`: seconds heard first for the noise estimate alone
    /// (`PocketSphinxSpeechDetector`), 0 for a detector that decides exactly as this engine's
    /// recognizers do; `quietBelow`: dBFS under which a block heard while no speech is open is
    /// passed over (nil: none is); `postSpeech`: seconds of silence that end speech, instead of
    /// the engine's `-vad_postspeech` (nil).
    public func makeSpeechDetector(settling: Double = 0, quietBelow: Double? = nil,
                                   postSpeech: Double? = nil) throws(StenoError) -> PocketSphinxSpeechDetector {
        let frames = postSpeech.map { max(1, Int(($0 * Double(PocketSphinxRecognizer.sampleRate) / Double(shape.frameShift)).rounded())) }
        return try PocketSphinxSpeechDetector(frontEnd: shape.makeFrontEnd(postSpeechFrames: frames), shape: shape,
                                              blockSamples: configuration.blockSamples,
                                              settleSamples: Int(max(0, settling) * Double(PocketSphinxRecognizer.sampleRate)),
                                              quietBelow: quietBelow, postSpeechFrames: frames)
    }

    /// The shared decoders now: how many exist, are idle, are lent, and how many recognizers
    /// wait for one.
    public var decoderStats: DecoderStats { pool.stats }

    public var load: RecognizerLoad {
        let s = pool.stats
        return RecognizerLoad(capacity: s.capacity, busy: s.lent, waiting: s.waiting, made: s.made)
    }

    /// Decoders idle in the pool right now.
    public var idleDecoders: Int { pool.stats.idle }

    /// Decoders this engine has made so far.
    public var decodersMade: Int { pool.stats.made }

    /// Where pocketsphinx's own log goes, for the whole process: a file (appended to), or
    /// nowhere when nil (the default). Errors are still captured for `StenoError` messages.
    public static func setLogFile(_ path: String?) throws(StenoError) {
        PocketSphinxDecoder.lifecycleLock.lock()
        defer { PocketSphinxDecoder.lifecycleLock.unlock() }
        steno_ps_install_log_callback()
        if steno_ps_set_log_file(path) != 0 {
            throw StenoError(.internal, "cannot open pocketsphinx log file \(path ?? "")")
        }
    }
}

/// What `PocketSphinxEngine.addWordsToLanguageModel` did with each word (`Vocabulary.key`).
public struct LanguageModelAdditions: Sendable, Hashable {
    /// Added to the LM; the dictionary had them.
    public var fromDictionary: [String] = []
    /// Added to the dictionary, with the letter-to-sound rules' phones, and to the LM.
    public var fromLetterToSound: [String] = []
    /// The LM has them already: left as they were.
    public var known: [String] = []
    /// No pronunciation found (or one with phones the model lacks): left out.
    public var unpronounced: [String] = []

    public init() {}

    public var added: Int { fromDictionary.count + fromLetterToSound.count }
}

/// What every decoder of an engine has in common, known from the first: frame geometry, voice
/// activity settings, a fresh cepstral mean, and the configuration to make front ends from.
final class DecoderShape: Sendable {
    let frameShift: Int
    let frameSize: Int
    let preSpeechFrames: Int
    let startSpeechFrames: Int
    let postSpeechFrames: Int
    let freshMean: FeatureState
    private let configuration: DecoderConfiguration

    init(_ decoder: PocketSphinxDecoder) {
        frameShift = decoder.frameShift
        frameSize = decoder.frameSize
        preSpeechFrames = decoder.preSpeechFrames
        startSpeechFrames = decoder.startSpeechFrames
        postSpeechFrames = decoder.postSpeechFrames
        freshMean = decoder.freshCMN
        configuration = DecoderConfiguration(decoder)
    }

    /// The decoders' configuration (retained as long as the shape).
    var config: OpaquePointer { configuration.config }

    /// A front end with the decoders' configuration, under the lock that serializes
    /// sphinxbase object creation (a configuration's reference count is not atomic);
    /// `postSpeechFrames`: its detector's own `-vad_postspeech`. sphinxbase has no copy of a
    /// configuration, and a front end reads its settings once, as it is made: the value is
    /// set for that moment and put back, under the same lock (decoders are made under it too).
    func makeFrontEnd(postSpeechFrames: Int? = nil) throws(StenoError) -> SpeechFrontEnd {
        PocketSphinxDecoder.lifecycleLock.lock()
        defer { PocketSphinxDecoder.lifecycleLock.unlock() }
        guard let postSpeechFrames, postSpeechFrames != self.postSpeechFrames else {
            return try SpeechFrontEnd(config: configuration.config)
        }
        cmd_ln_set_int_r(configuration.config, "-vad_postspeech", postSpeechFrames)
        defer { cmd_ln_set_int_r(configuration.config, "-vad_postspeech", self.postSpeechFrames) }
        return try SpeechFrontEnd(config: configuration.config)
    }
}

/// A retained sphinxbase logmath (`logmath_t`): read-only tables, shared by the phrase models
/// of an engine's sessions.
final class LogmathHandle: @unchecked Sendable {
    let pointer: OpaquePointer

    init(_ logmath: OpaquePointer) {
        PocketSphinxDecoder.lifecycleLock.lock()
        pointer = logmath_retain(logmath)
        PocketSphinxDecoder.lifecycleLock.unlock()
    }

    deinit {
        PocketSphinxDecoder.lifecycleLock.lock()
        logmath_free(pointer)
        PocketSphinxDecoder.lifecycleLock.unlock()
    }
}

/// A retained sphinxbase configuration (`cmd_ln_t`), read-only once made.
final class DecoderConfiguration: @unchecked Sendable {
    let config: OpaquePointer

    init(_ decoder: PocketSphinxDecoder) {
        PocketSphinxDecoder.lifecycleLock.lock()
        config = cmd_ln_retain(decoder.config)
        PocketSphinxDecoder.lifecycleLock.unlock()
    }

    deinit {
        PocketSphinxDecoder.lifecycleLock.lock()
        cmd_ln_free_r(config)
        PocketSphinxDecoder.lifecycleLock.unlock()
    }
}
