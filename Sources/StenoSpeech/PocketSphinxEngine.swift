import CPocketSphinx
import CPocketSphinxShims
import Dispatch
import Foundation
import StenoCore
import StenoSystem

/// The pocketsphinx speech engine: the model configuration and a pool of decoders.
///
/// Making a decoder (`ps_init`) costs ≈0.5 s of CPU and ≈95 MB, and the acoustic model cannot
/// be shared between decoders in this pocketsphinx; a language model can, but search writes
/// its caches, so one must never serve two decoders running at once. So each session gets a
/// decoder of its own, with its own model copies, from a pool:
/// - `makeRecognizer` takes an idle decoder, or makes one (blocking, ≈0.5 s) if none is idle;
/// - when a recognizer finishes or is cancelled, its decoder is reset to exactly the state
///   of a fresh one (see `PocketSphinxDecoder.resetForReuse`) and goes back to the pool,
///   which keeps up to `maxIdleDecoders` of them;
/// - with `readyDecoders > 0` the pool keeps that many idle decoders made in the background,
///   so that a new session rarely waits.
///
/// Thread-safe: the pool is guarded by a lock, and each decoder is used by one recognizer.
public final class PocketSphinxEngine: SpeechEngine, Sendable {
    public let configuration: PocketSphinxConfiguration
    public let info: SpeechEngineInfo
    private let pool: DecoderPool

    /// Validates the configuration and loads one decoder, so that a bad model path fails here
    /// (with pocketsphinx's reason) rather than in the first session. Blocking (≈0.5 s).
    public init(configuration: PocketSphinxConfiguration = PocketSphinxConfiguration()) throws(StenoError) {
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
        self.pool = DecoderPool(
            arguments: configuration.decoderArguments,
            ready: configuration.readyDecoders,
            maxIdle: max(configuration.maxIdleDecoders, configuration.readyDecoders))
        try pool.prepare(count: max(1, configuration.readyDecoders))
    }

    public func makeRecognizer(options: RecognizerOptions) throws(StenoError) -> any SpeechRecognizer {
        try makePocketSphinxRecognizer(options: options)
    }

    /// `makeRecognizer` with the concrete type (for tests and benchmarks).
    public func makePocketSphinxRecognizer(options: RecognizerOptions = RecognizerOptions()) throws(StenoError) -> PocketSphinxRecognizer {
        let decoder = try pool.take()
        let maxSeconds = options.maxUtteranceSeconds ?? configuration.maxUtteranceSeconds
        guard maxSeconds > 0, maxSeconds.isFinite else {
            pool.giveBack(decoder)
            throw StenoError(.internal, "maxUtteranceSeconds must be a positive number of seconds, not \(maxSeconds)")
        }
        return try PocketSphinxRecognizer(
            decoder: decoder, pool: pool, info: info,
            blockSamples: configuration.blockSamples,
            maxUtteranceSeconds: maxSeconds,
            partialResults: options.partialResults)
    }

    /// Makes decoders now until `sessions` are idle and ready. Blocking (≈0.5 s each); a
    /// server calls it at start-up, off the network thread.
    public func prepare(sessions: Int) throws(StenoError) {
        try pool.prepare(count: sessions)
    }

    /// A standalone speech detector with the decoders' voice activity settings (no model:
    /// cheap to make and to run).
    public func makeSpeechDetector() throws(StenoError) -> PocketSphinxSpeechDetector {
        try pool.withConfiguration { (config) throws(StenoError) in
            try PocketSphinxSpeechDetector(config: config, blockSamples: configuration.blockSamples)
        }
    }

    /// Decoders idle in the pool right now.
    public var idleDecoders: Int { pool.idleCount }

    /// Decoders this engine has made so far (a measure of how often sessions waited or the
    /// pool refilled).
    public var decodersMade: Int { pool.madeCount }

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

/// Idle decoders, with background refills. Internal to the engine.
final class DecoderPool: Sendable {
    private struct State {
        var idle: [PocketSphinxDecoder] = []
        var making = 0
        var made = 0
        var lastBackgroundError: StenoError?
    }

    private let arguments: [String]
    /// The first decoder's configuration (with the model's feat.params), to make detectors.
    private let template = Locked<DecoderConfiguration?>(nil)
    private let ready: Int
    private let maxIdle: Int
    private let state = Locked(State())

    init(arguments: [String], ready: Int, maxIdle: Int) {
        self.arguments = arguments
        self.ready = ready
        self.maxIdle = maxIdle
    }

    var idleCount: Int { state.withLock { $0.idle.count } }
    var madeCount: Int { state.withLock { $0.made } }

    private func make() throws(StenoError) -> PocketSphinxDecoder {
        let decoder = try PocketSphinxDecoder(arguments: arguments)
        state.withLock { $0.made += 1 }
        if template.withLock({ $0 == nil }) {
            let kept = DecoderConfiguration(decoder)
            template.withLock { if $0 == nil { $0 = kept } }
        }
        return decoder
    }

    /// Runs `body` with a decoder configuration, under the lock that serializes sphinxbase
    /// object creation (a configuration's reference count is not atomic).
    func withConfiguration<R>(_ body: (OpaquePointer) throws(StenoError) -> R) throws(StenoError) -> R {
        if template.withLock({ $0 == nil }) {
            try prepare(count: 1)
        }
        guard let kept = template.withLock({ $0 }) else {
            throw StenoError(.internal, "no pocketsphinx configuration to make a detector from")
        }
        PocketSphinxDecoder.lifecycleLock.lock()
        defer { PocketSphinxDecoder.lifecycleLock.unlock() }
        return try body(kept.config)
    }

    /// An idle decoder, or a new one. Starts a background refill if the pool runs low.
    func take() throws(StenoError) -> PocketSphinxDecoder {
        let taken: PocketSphinxDecoder? = state.withLock { $0.idle.popLast() }
        defer { refillInBackground() }
        if let taken { return taken }
        return try make()
    }

    /// Takes back a decoder a recognizer no longer needs, reset for the next session.
    func giveBack(_ decoder: PocketSphinxDecoder) {
        do {
            try decoder.resetForReuse()
        } catch {
            return  // a decoder that cannot be reset is freed, never reused
        }
        state.withLock { state in
            if state.idle.count < maxIdle { state.idle.append(decoder) }
        }
        // A decoder not kept is freed here, outside the pool lock.
    }

    /// Makes decoders until `count` are idle.
    func prepare(count: Int) throws(StenoError) {
        while state.withLock({ $0.idle.count + $0.making < count }) {
            state.withLock { $0.making += 1 }
            let result: Result<PocketSphinxDecoder, StenoError>
            do throws(StenoError) { result = .success(try make()) } catch { result = .failure(error) }
            state.withLock { state in
                state.making -= 1
                if case .success(let decoder) = result { state.idle.append(decoder) }
            }
            if case .failure(let error) = result { throw error }
        }
    }

    private func refillInBackground() {
        let wanted = state.withLock { state -> Int in
            let missing = max(0, ready - state.idle.count - state.making)
            state.making += missing
            return missing
        }
        guard wanted > 0 else { return }
        DispatchQueue.global(qos: .utility).async { [self] in
            for _ in 0..<wanted {
                let result: Result<PocketSphinxDecoder, StenoError>
                do throws(StenoError) { result = .success(try make()) } catch { result = .failure(error) }
                state.withLock { state in
                    state.making -= 1
                    switch result {
                    case .success(let decoder): state.idle.append(decoder)
                    case .failure(let error): state.lastBackgroundError = error
                    }
                }
            }
        }
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
