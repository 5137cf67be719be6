import Foundation
import StenoCore
import StenoSpeech
import StenoSystem
import StenoTransport
import StenoWorkers
import Synchronization
@testable import StenoServer

// The session layer without sockets or models: the Router driven as the transport would drive
// it, connections in memory, a manual worker pool (jobs run when the test says), and a scripted
// speech engine whose shared "decoders" are lent and waited for like pocketsphinx's. Fast and
// deterministic enough to run thousands of sessions.

// MARK: - Connections in memory

/// A `ConnectionSink` that keeps each connection's queue, numbers messages as the transport
/// does when the test lets the client read them, and records closes and flow control.
final class MemoryConnections: ConnectionSink {
    struct Connection {
        var queue: OutboundQueue<OutgoingMessage>
        var written: UInt64 = 0
        var received: [String] = []
        var close: (code: UInt16, reason: String)?
        var reading = true
        /// Every `setReading` the session layer asked for, in order.
        var readingChanges: [Bool] = []
    }

    private let state = Locked<[ConnectionID: Connection]>([:])
    let outboundBytes: Int
    /// Called with each message as the service hands it over (before the client could read it).
    let onSend = Locked<(@Sendable (ConnectionID, OutgoingMessage) -> Void)?>(nil)

    init(outboundBytes: Int = 1 << 20) {
        self.outboundBytes = outboundBytes
    }

    func open(_ id: ConnectionID) {
        state.withLock { $0[id] = Connection(queue: OutboundQueue(byteLimit: outboundBytes)) }
    }

    func send(_ id: ConnectionID, _ message: OutgoingMessage) -> SendResult {
        onSend.withLock { $0 }?(id, message)
        return state.withLock { s in
            guard s[id] != nil, s[id]?.close == nil else { return .closed }
            switch s[id]!.queue.enqueue(message, size: message.byteCount, delivery: message.delivery) {
            case .queued: return .queued
            case .replaced: return .replaced
            case .overflow: return .overflow
            }
        }
    }

    func close(_ id: ConnectionID, code: UInt16, reason: String, discardQueued: Bool) {
        state.withLock { s in
            guard s[id] != nil, s[id]?.close == nil else { return }
            s[id]!.close = (code, reason)
            if discardQueued { s[id]!.queue.removeAll() }
        }
    }

    func setReading(_ id: ConnectionID, _ reading: Bool) {
        state.withLock { s in
            guard s[id] != nil else { return }
            s[id]!.reading = reading
            s[id]!.readingChanges.append(reading)
        }
    }

    func queuedBytes(_ id: ConnectionID) -> Int? { state.withLock { $0[id]?.queue.byteCount } }
    func retainWritten(_ id: ConnectionID, bytes: Int) {}
    func adopt(_ id: ConnectionID, _ backlog: OutboundBacklog, after ordinal: UInt64, retaining bytes: Int) -> Bool { false }
    func detach(_ id: ConnectionID) -> OutboundBacklog? { nil }

    /// The client reads everything queued: the messages as it receives them, numbered.
    @discardableResult
    func read(_ id: ConnectionID) -> [String] {
        state.withLock { s in
            guard var c = s[id] else { return [] }
            var texts: [String] = []
            while let message = c.queue.dequeue() {
                if message.ordinalSlot != nil { c.written += 1 }
                texts.append(String(decoding: message.ordinalSlot?.numbered(message.bytes, seq: c.written).bytes ?? message.bytes, as: UTF8.self))
            }
            c.received += texts
            s[id] = c
            return texts
        }
    }

    func received(_ id: ConnectionID) -> [String] { state.withLock { $0[id]?.received ?? [] } }
    func closeRequest(_ id: ConnectionID) -> (code: UInt16, reason: String)? { state.withLock { $0[id]?.close } }
    func isReading(_ id: ConnectionID) -> Bool { state.withLock { $0[id]?.reading ?? false } }
    func readingChanges(_ id: ConnectionID) -> [Bool] { state.withLock { $0[id]?.readingChanges ?? [] } }
}

// MARK: - A scripted engine

/// Recognizes "speech" without a model: 16 kHz audio in blocks of 2048 samples, a block is
/// speech when a sample's magnitude exceeds 0.1. An utterance is the speech blocks in a row;
/// each adds a word `wN` covering its block; a silent block after speech ends it as a final.
/// Utterances need one of the engine's `capacity` decoders, lent first come first served by the
/// pool pocketsphinx's are lent by: a recognizer that finds none waits (keeping its audio)
/// until woken.
final class ScriptedEngine: SpeechEngine {
    let info = SpeechEngineInfo(name: "scripted", version: "1", model: "test", language: "en-US", sampleRate: 16000)
    fileprivate let decoders: ScriptedDecoders

    init(capacity: Int) {
        decoders = ScriptedDecoders(capacity: capacity)
    }

    /// While set, recognizers cannot be made (as when a model fails to load): sessions fail.
    let refusesRecognizers = Atomic<Bool>(false)
    /// While set, recognizers made fail (throw `internal`) once they have analyzed this many
    /// blocks: an engine that breaks in the middle of a session.
    let failsAfterBlocks = Locked<Int?>(nil)
    /// CPU seconds each speech block costs "elsewhere" (as a worker process's would be), in
    /// `engineSeconds`: 0, an engine that works in the lane.
    let engineSecondsPerSpeechBlock = Locked(0.0)

    func makeRecognizer(options: RecognizerOptions, wake: @escaping @Sendable () -> Void) throws(StenoError) -> any SpeechRecognizer {
        if refusesRecognizers.load(ordering: .relaxed) { throw StenoError(.internal, "the scripted engine refuses") }
        return ScriptedRecognizer(decoders: decoders, wake: wake, volatiles: options.volatileResults,
                                  engineCost: engineSecondsPerSpeechBlock.withLock { $0 },
                                  failsAfter: failsAfterBlocks.withLock { $0 })
    }

    var load: RecognizerLoad { decoders.load }
    var recognizersAlive: Int { decoders.recognizersAlive.load(ordering: .relaxed) }
}

/// The scripted engine's "decoders": nothing in them, lent and waited for through the pool
/// pocketsphinx's decoders are shared with (`SharedPool`), all made at once.
final class ScriptedDecoders: Sendable {
    final class Decoder: Sendable {}

    let capacity: Int
    let pool: SharedPool<Decoder>
    /// Recognizers made and not yet freed.
    let recognizersAlive = Atomic<Int>(0)

    init(capacity: Int) {
        self.capacity = capacity
        pool = SharedPool(capacity: capacity, make: { Decoder() })
        try? pool.prepare(count: capacity)
    }

    var load: RecognizerLoad {
        let stats = pool.stats
        return RecognizerLoad(capacity: capacity, busy: stats.lent, waiting: stats.waiting)
    }
}

final class ScriptedRecognizer: SpeechRecognizer {
    let info = SpeechEngineInfo(name: "scripted", version: "1", model: "test", language: "en-US", sampleRate: 16000)
    let sampleRate = 16000
    private let decoders: ScriptedDecoders
    private let waiter: PoolWaiter<ScriptedDecoders.Decoder>
    private let volatiles: Bool
    private var decoder: ScriptedDecoders.Decoder?
    private var waiting = false
    private var pending: [Float] = []
    private var fed = 0
    private var words: [Word] = []
    private var endAsked: Bool?  // true: finish
    private var done = false
    private let engineCost: Double
    private(set) var engineSeconds = 0.0
    /// Blocks after which `accept` fails (`ScriptedEngine.failsAfterBlocks`).
    private let failsAfter: Int?

    init(decoders: ScriptedDecoders, wake: @escaping @Sendable () -> Void, volatiles: Bool, engineCost: Double = 0,
         failsAfter: Int? = nil) {
        self.engineCost = engineCost
        self.failsAfter = failsAfter
        self.decoders = decoders
        self.waiter = PoolWaiter(wake: wake)
        self.volatiles = volatiles
        decoders.recognizersAlive.add(1, ordering: .relaxed)
    }

    deinit {
        cancel()
        decoders.recognizersAlive.subtract(1, ordering: .relaxed)
    }

    var analyzedSeconds: Double { Double(fed) / 16000 }
    var isWaiting: Bool { waiting }

    func accept(_ samples: UnsafeBufferPointer<Float>) throws(StenoError) -> [TranscriberEvent] {
        guard !done else { throw StenoError(.internal, "finished") }
        pending += samples
        let events = run()
        if let failsAfter, fed >= failsAfter * 2048 { throw StenoError(.internal, "the scripted engine broke") }
        return events
    }

    func endUtterance() throws(StenoError) -> [TranscriberEvent] {
        endAsked = endAsked ?? false
        return run()
    }

    func finish() throws(StenoError) -> [TranscriberEvent] {
        endAsked = true
        return run()
    }

    func proceed() throws(StenoError) -> [TranscriberEvent] { run() }

    func skipSilence(_ samples: Int) throws(StenoError) -> [TranscriberEvent] {
        let events = try endUtterance()
        fed += samples
        return events
    }

    func cancel() {
        release()
        decoders.pool.withdraw(waiter)
        done = true
    }

    private func run() -> [TranscriberEvent] {
        var events: [TranscriberEvent] = []
        if waiting {
            guard case .success(let granted)? = waiter.take() else { return events }
            waiting = false
            decoder = granted
        }
        while !waiting && !done {
            let take = pending.count >= 2048 ? 2048 : (endAsked != nil ? pending.count : 0)
            if take == 0 && endAsked == nil { break }
            let block = Array(pending.prefix(take))
            let speech = block.contains { abs($0) > 0.1 }
            if speech && decoder == nil {
                decoder = decoders.pool.take(for: waiter)
                if decoder == nil {
                    waiting = true
                    break
                }
            }
            pending.removeFirst(take)
            let start = Double(fed) / 16000
            fed += take
            let end = Double(fed) / 16000
            if speech {
                engineSeconds += engineCost
                if words.isEmpty { events.append(.speechStarted(at: start)) }
                words.append(Word("w\(words.count + 1)", range: TimeRange(start: start, end: end), confidence: 0.9))
                if volatiles { events.append(.volatile(result(words))) }
            } else if !words.isEmpty {
                events.append(.final(result(words)))
                events.append(.speechEnded(at: end))
                words = []
                release()
            }
            if take < 2048 {
                // The end asked for: what was heard is final now.
                if !words.isEmpty { events += [.final(result(words)), .speechEnded(at: end)] }
                words = []
                release()
                if endAsked == true { done = true }
                endAsked = nil
                break
            }
        }
        return events
    }

    private func release() {
        if let decoder {
            self.decoder = nil
            decoders.pool.giveBack(decoder)
        }
    }

    private func result(_ words: [Word]) -> RecognitionResult {
        RecognitionResult(range: TimeRange(start: words[0].range.start, end: words[words.count - 1].range.end),
                          text: words.map(\.text).joined(separator: " "), words: words)
    }
}

// MARK: - The session layer, assembled

/// A Router with sessions, channels and metrics on memory connections, a manual worker pool
/// and a scripted engine: the test is the transport.
final class MemoryServer {
    let connections: MemoryConnections
    let engine: ScriptedEngine
    let pool = WorkerPool.manual()
    let metrics = StenoMetrics()
    let router: Router
    let sessions = SessionRegistry()
    let channels: ChannelHub
    private var nextID: UInt64 = 1

    /// `speech`: the engine the sessions recognize with, instead of the scripted one (which
    /// `engine` still is): a real one makes the lanes' order, which the test decides, drive
    /// real recognition.
    init(recognizers: Int = 4, speech: (any SpeechEngine)? = nil, _ configure: (inout ServerOptions) -> Void = { _ in }) {
        var options = ServerOptions()
        options.limits.idleTimeoutSeconds = 0
        options.limits.resumeSeconds = 0
        // Admission's demand is lane time per wall-clock second; here audio runs through on the
        // test's thread as fast as it can, where that means nothing (AdmissionTests turn it on).
        options.admitUtilization = 0
        configure(&options)
        let limits = options.limits
        connections = MemoryConnections(outboundBytes: options.limits.outboundBytes)
        engine = ScriptedEngine(capacity: recognizers)
        channels = ChannelHub(handle: connections, metrics: metrics, maxPastBroadcasts: options.pastBroadcasts,
                              layout: options.captionLayout, hls: options.hls)
        var configuration = SessionConfiguration(
            engine: EngineInfo(name: "scripted", model: "test", language: "en-US", sampleRate: 16000), limits: limits)
        if let speech {
            configuration = SessionConfiguration(engine: speech.info.announced, limits: limits)
            configuration.models = speech.servedModels
        }
        let context = ServerContext(
            handle: connections, engine: speech ?? engine, pool: pool, metrics: metrics, log: .silent,
            channels: channels, sessions: sessions, sessionConfiguration: configuration)
        router = Router(context: context, options: options, registry: sessions)
        metrics.attach(sessions: sessions)
    }

    /// An upgrade to `path`: its decision, and the new connection if accepted.
    func connect(_ path: String = "/v1/stream") -> (UpgradeDecision, ConnectionID?) {
        let (path, query) = Self.split(path)
        let request = UpgradeRequest(path: path, query: query)
        let decision = router.decideUpgrade(request)
        guard decision == .accept else { return (decision, nil) }
        let id = ConnectionID(rawValue: nextID)
        nextID += 1
        connections.open(id)
        router.opened(id, request: request)
        return (decision, id)
    }

    func send(_ id: ConnectionID, _ text: String) { router.received(id, .text(text)) }
    func send(_ id: ConnectionID, audio: [UInt8]) { router.received(id, .binary(audio)) }

    /// Runs what the lanes have to do, then a tick.
    func settle() {
        while pool.runPending() > 0 {}
        router.tick()
        while pool.runPending() > 0 {}
    }

    /// The client hangs up.
    func disconnect(_ id: ConnectionID) { router.closed(id, backlog: nil) }

    /// The events a client has read, parsed.
    func events(_ id: ConnectionID) -> [JSONObject] {
        connections.read(id)
        return connections.received(id).compactMap { text in
            if case .object(let o)? = try? JSONParser().parse(text) { return o } else { return nil }
        }
    }

    static func split(_ path: String) -> (String, [QueryItem]) {
        guard let q = path.firstIndex(of: "?") else { return (path, []) }
        let items = path[path.index(after: q)...].split(separator: "&").map { pair -> QueryItem in
            let parts = pair.split(separator: "=", maxSplits: 1)
            return QueryItem(name: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : "")
        }
        return (String(path[..<q]), items)
    }

    static let start = #"{"type":"start","audio":{"encoding":"pcm_s16le","sampleRate":16000,"channels":1}}"#

    /// `seconds` of 16 kHz s16 PCM: a tone when `speech`, else silence.
    static func pcm(seconds: Double, speech: Bool) -> [UInt8] {
        pcm(samples: Int(seconds * 16000), speech: speech)
    }

    /// `n` samples of 16 kHz s16 PCM: a tone when `speech`, else silence.
    static func pcm(samples n: Int, speech: Bool) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 2 * n)
        if speech {
            for i in 0..<n {
                let v = Int16(i % 32 < 16 ? 8000 : -8000)
                bytes[2 * i] = UInt8(truncatingIfNeeded: v)
                bytes[2 * i + 1] = UInt8(truncatingIfNeeded: v >> 8)
            }
        }
        return bytes
    }
}

extension JSONObject {
    var type: String { if case .string(let s)? = self["type"] { s } else { "" } }
    func number(_ key: String) -> Double? { if case .number(let n)? = self[key] { n } else { nil } }
}
