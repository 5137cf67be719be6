// The session state machine: one per `/v1/stream` connection.
//
// It is a value type with no I/O, no clock and no threads. The server feeds it inputs
// (`SessionInput`) under its own lock and carries out the returned `SessionAction`s in order.
//
//   awaitingStart ──start──▶ streaming ⇄ finalizing ──end / limit / idle / shutdown──▶ ending
//        │                       │                                                   │
//        └── fatal error ──▶ failed(code)      cancel ──▶ cancelled        pipeline done ──▶ ended
//                                                                                     (or failed(code))
//
// Decisions where the first protocol was silent (marked (choice) in docs/protocol.md):
// - A `start` whose language the engine cannot serve (see `LanguageTag.serves`) gets a
//   non-fatal `bad_message` naming the served language; no session starts and the client may
//   send another `start`. A `start` without `language` gets the engine's language.
// - Audio after `end`: dropped; the first such frame gets a non-fatal `bad_message`, later ones
//   nothing. `finalize` or a second `end` while ending: non-fatal `bad_message`. `cancel` while
//   ending is honoured. A second `start` is always `not_started` (4400), as the table says.
// - `cancelled.through`: how far analysis had got, as far as this machine knows (the last
//   `analyzedThrough` reported, or the last final's end if later), clamped to what was received.
//   Audio after it was discarded unanalyzed. Cancel takes effect at once: no round trip to
//   the pipeline (`cancelPipeline` is fire-and-forget; late pipeline reports are ignored).
// - `finalized.through` and `ended.duration` are computed here from the audio received
//   (the timeline of docs/protocol.md), not taken from the pipeline.
// - Idle timeout: runs while awaiting `start` and while streaming with no finalize pending;
//   it restarts on every client frame and whenever analysis advances (a client blocked by our
//   own backpressure is not idle). In a session it ends like the session limit: finalize
//   first (finals delivered), then `idle` and close 4010. Before `start`: `idle` at once.
// - Maximum session duration: wall (monotonic) seconds since `start` was accepted.
// - Start deadline: a connection that has not had its `start` (or `resume`) accepted within
//   `startTimeoutSeconds` of opening is closed with `idle`, whatever else it sent: a socket
//   that never starts holds nothing for long.
// - Shutdown: sessions awaiting `start` close at once with `shutting_down`; streaming ones
//   finalize, deliver their finals, then `shutting_down` / 1001; sessions already ending on the
//   client's `end` finish normally (`ended`, 1000). `shutdownDeadline` closes at once.
// - Fatal errors cancel the pipeline, send `error` (fatal: true), then close with its code.
// - Resume: a session whose connection drops without `end` is *detached* for
//   `limits.resumeSeconds`: the pipeline goes on with the audio it has, events keep coming
//   (the server holds them for the client), the idle timer stops. A `resume` on a new
//   connection attaches it again: `resumed` says how much audio the server has, and a paused
//   socket is paused again on the new connection. When the grace period passes, the session
//   is finalized (its finals still reach a channel) and closes without a close frame.
// - `gap`: the timeline advances by the duration, without audio; the `gap` event reports it
//   at once; the utterance in progress ends there (audio on both sides of a hole is not one
//   utterance). `silence` (suppressed silence) is the same on the timeline, with no event:
//   it counts as activity, like audio, and after `end` it is audio after `end`.

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

/// A binary frame of audio accepted for the pipeline.
public struct AudioChunk: Sendable, Hashable {
    /// The frame as received: whole PCM sample frames, or one Opus packet.
    public var bytes: [UInt8]
    /// Where the chunk begins on the session timeline, in seconds.
    public var start: Double
    /// Its duration in seconds (PCM: frames / rate; Opus: from the TOC, see `headerIsMalformed`).
    public var duration: Double
    /// Opus only: the packet's header is unreadable. Pass it to the decoder anyway (it conceals
    /// it); its `duration` is that of the last good packet. The client was already sent a
    /// `bad_audio` for it, so the decoder should not report it again.
    public var headerIsMalformed: Bool

    public init(bytes: [UInt8], start: Double, duration: Double, headerIsMalformed: Bool = false) {
        self.bytes = bytes
        self.start = start
        self.duration = duration
        self.headerIsMalformed = headerIsMalformed
    }
}

/// What the server must do, in the order given.
public enum SessionAction: Sendable, Hashable {
    /// Queue this event on the connection, which numbers it (`seq`) as it delivers it.
    case send(EncodedEvent)
    /// Create the decode/recognize pipeline for this request. `ready` is sent right after;
    /// if the pipeline cannot be made, feed `.pipelineFailed`.
    case startPipeline(StartRequest)
    /// Hand this audio to the pipeline (after decoding/resampling as its format says).
    case submitAudio(AudioChunk)
    /// Finalize everything through `through` (seconds); then feed `.finalizeCompleted`
    /// after delivering the finals it produced.
    case submitFinalize(through: Double)
    /// End of input: finalize everything; then feed `.endCompleted` after delivering its finals.
    case submitEnd
    /// `duration` seconds of the timeline, starting at `start`, have no audio (a declared gap,
    /// or silence the client did not send): end the utterance in progress and go on after it.
    case submitGap(start: Double, duration: Double)
    /// The client, instead of `start`, asks to continue the detached session of the request on
    /// this connection. If it may, this machine is dropped and the session's own machine gets
    /// `.attached`; if not, feed `.resumeRejected`.
    case resume(ResumeRequest)
    /// Stop the pipeline and discard audio not yet analyzed. Nothing is fed back.
    case cancelPipeline
    /// Stop reading the client's socket: `limits.bufferSeconds` of audio wait for analysis
    /// (TCP backpressure on the client). Said once; `resumeReading` follows.
    case pauseReading
    /// Read the socket again: the backlog has drained to half the buffer (hysteresis).
    case resumeReading
    /// Close the WebSocket with this code after the queued events are sent.
    /// `reason` is short ASCII (≤ 123 bytes). Nothing follows a close.
    case close(code: UInt16, reason: String)
}

/// Everything that can happen to a session.
public enum SessionInput: Sendable, Hashable {
    /// A complete text frame. `now` is monotonic seconds; `wallClock` is used for `startedAt`.
    case text(String, now: Double, wallClock: UTCTime)
    /// A complete text frame as raw bytes (validated as UTF-8 here).
    case textBytes([UInt8], now: Double, wallClock: UTCTime)
    /// A complete binary frame.
    case audio([UInt8], now: Double)
    /// The transport refused a frame over `limits.maxFrameBytes` without assembling it.
    case frameTooLarge(bytes: Int)
    /// The pipeline's recognizer events, in order, and how far analysis has got (seconds).
    case results([TranscriberEvent], analyzedThrough: Double?, now: Double)
    /// The pipeline finished the oldest outstanding `submitFinalize` (its finals were fed before).
    case finalizeCompleted
    /// The pipeline finished `submitEnd` (its finals were fed before).
    case endCompleted
    /// A non-fatal problem the pipeline wants the client told about (e.g. `bad_audio` for an
    /// undecodable Opus packet). A fatal code is treated as a failure with that code.
    case pipelineWarning(StenoError)
    /// The pipeline broke (a bug or resource failure) → `internal`, close 1011.
    case pipelineFailed(String)
    /// Periodic clock tick (monotonic seconds): progress, idle timeout, session limit.
    case tick(now: Double)
    /// The server is draining: finalize, deliver finals, then `shutting_down` / 1001.
    case shutdown
    /// The drain took too long: `shutting_down` / 1001 now.
    case shutdownDeadline
    /// The connection's unsent events went over `limits.outboundBytes` → `slow_consumer` / 4008.
    /// While detached (the events held for a resume went over it): the session can no longer
    /// be resumed whole, and ends as if its grace period were over (its finals still made).
    case outboundOverflow
    /// The peer closed or the socket broke: stop everything, send nothing.
    case peerClosed
    /// The connection dropped and the client may resume the session (`limits.resumeSeconds`):
    /// a started session is detached; one awaiting `start` ends as with `.peerClosed`.
    case connectionLost(now: Double)
    /// A client resumed this detached session on a new connection.
    case attached(now: Double)
    /// The `resume` this connection asked for cannot be granted (why, in plain words).
    case resumeRejected(String)
}

/// Why a session is ending.
public enum EndReason: Sendable, Hashable {
    /// The client sent `end`.
    case requested
    /// `limits.maxSessionSeconds` was reached.
    case sessionLimit
    /// `limits.idleTimeoutSeconds` passed without client frames or analysis progress.
    case idle
    /// The server is shutting down.
    case shuttingDown
    /// The connection dropped and the client did not resume within `limits.resumeSeconds`.
    case abandoned

    /// The error sent after the finals, or nil for a client's `end` (which gets `ended`).
    public var errorCode: ErrorCode? {
        switch self {
        case .requested: return nil
        case .sessionLimit: return .sessionLimit
        case .idle: return .idle
        case .shuttingDown: return .shuttingDown
        case .abandoned: return nil
        }
    }
}

/// Where a session is in its life.
public enum SessionPhase: Sendable, Hashable {
    case awaitingStart
    /// Started; no finalize outstanding.
    case streaming
    /// Started; at least one `finalize` is outstanding.
    case finalizing
    /// End of input submitted; waiting for the pipeline's last finals.
    case ending(EndReason)
    /// Closed after `ended` (1000).
    case ended
    /// Closed after `cancelled` (1000).
    case cancelled
    /// Closed after a fatal error with this code.
    case failed(ErrorCode)
    /// The peer went away.
    case disconnected

    /// The WebSocket close the session asked for (nil while open, and when the peer left).
    public var close: (code: UInt16, reason: String)? {
        switch self {
        case .ended: return (1000, "ended")
        case .cancelled: return (1000, "cancelled")
        case .failed(let code): return (code.closeCode ?? 1011, code.rawValue)
        default: return nil
        }
    }

    /// Waiting for the pipeline's last finals after `end` (or a limit, or the drain).
    public var isEnding: Bool {
        if case .ending = self { true } else { false }
    }

    /// True once the session has closed or asked to close: no input produces anything more.
    public var isClosed: Bool {
        switch self {
        case .ended, .cancelled, .failed, .disconnected: return true
        default: return false
        }
    }
}

/// The protocol logic of one session. See the top of Session.swift for the decisions it embodies.
///
/// Guarantees: events come out in the order the client must see them (the connection numbers
/// them); a fatal error is always followed by its close; nothing is returned after a close;
/// `pauseReading` and `resumeReading` alternate, starting with a pause; it never traps on any
/// input.
public struct SessionMachine: Sendable {
    public let id: String
    public let configuration: SessionConfiguration
    /// The accepted `start`, once there is one.
    public private(set) var request: StartRequest?
    /// Wall-clock time the session started (the `ready` event's `startedAt`).
    public private(set) var startedAt: UTCTime?

    private enum Stage: Sendable {
        case awaitingStart
        case open
        case ending(EndReason)
        case closed(SessionPhase)
    }

    private var stage: Stage = .awaitingStart
    /// Since when the session has had no connection (resumable), or nil while it has one.
    private var detachedSince: Double?
    /// What `ready` tells the client to resume with; nil when sessions cannot be resumed.
    private let resumeToken: String?
    /// More events were made while detached than are held for the client: a resume would
    /// miss some, so none is granted.
    public private(set) var resumeForfeited = false
    private var assembler = TranscriptAssembler()
    /// `through` of each outstanding finalize, oldest first.
    private var pendingFinalizes: [Double] = []
    /// Audio received, in samples at `unitRate` (the PCM rate, or 48 kHz for Opus).
    private var receivedUnits: Int64 = 0
    private var unitRate: Double = 1
    private var analyzed: Double = 0
    private var lastOpusSamples: Int
    private var lastActivity: Double
    /// When the connection opened (the `start` deadline runs from here).
    private let openedMonotonic: Double
    private var startedMonotonicTime: Double = 0
    private var lastProgressAt: Double = -Double.infinity
    private var lastProgressReceived: Double = 0
    private var lastProgressAnalyzed: Double = 0
    private var warnedAudioAfterEnd = false

    /// A session for a new connection; `now` is monotonic seconds (starts the idle timer).
    /// `resumeToken` is the secret a client needs to resume the session after its connection
    /// dropped (nil, or `limits.resumeSeconds` 0: no resume).
    public init(id: String, configuration: SessionConfiguration, now: Double, resumeToken: String? = nil) {
        self.id = id
        self.configuration = configuration
        self.resumeToken = configuration.limits.resumeSeconds > 0 ? resumeToken : nil
        self.lastActivity = now
        self.openedMonotonic = now
        self.lastOpusSamples = configuration.defaultOpusPacketSamples
    }

    // MARK: State the server may read

    public var phase: SessionPhase {
        switch stage {
        case .awaitingStart: return .awaitingStart
        case .open: return pendingFinalizes.isEmpty ? .streaming : .finalizing
        case .ending(let reason): return .ending(reason)
        case .closed(let phase): return phase
        }
    }

    public var isClosed: Bool { phase.isClosed }

    /// Whether the session has lost its connection and waits for the client to resume it.
    public var isDetached: Bool { detachedSince != nil && !isClosed }

    /// Whether `token` is this session's resume token (compared in constant time).
    public func acceptsResume(token: String) -> Bool {
        guard let resumeToken, !resumeForfeited else { return false }
        let a = Array(resumeToken.utf8), b = Array(token.utf8)
        var diff = UInt8(truncatingIfNeeded: a.count ^ b.count)
        for i in 0..<max(a.count, b.count) {
            diff |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return diff == 0 && a.count == b.count
    }

    /// Seconds of audio received (on the millisecond grid).
    public var receivedSeconds: Double {
        TranscriptAssembler.quantize(Double(receivedUnits) / unitRate, otherwise: 0)
    }

    /// Seconds of audio analyzed, never more than received.
    public var analyzedSeconds: Double {
        min(receivedSeconds, max(analyzed, assembler.lastFinalEnd))
    }

    /// Audio received but not analyzed yet, in seconds.
    public var backlogSeconds: Double {
        // Sums of different durations: when analysis has caught up they differ by rounding
        // (1e-16), which is nothing.
        let backlog = receivedSeconds - analyzedSeconds
        return backlog < 1e-9 ? 0 : backlog
    }

    /// The finals sent so far (with words), for broadcast backfill and captions.
    public var finals: [RecognitionResult] { assembler.finals }

    /// The earliest time a final still to come can start (see `TranscriptAssembler.nextFinalStart`):
    /// a channel's live captions are settled before it.
    public var captionFloor: Double { assembler.nextFinalStart(analyzed: analyzedSeconds) }

    /// The volatile result the client is showing, if any (for a viewer joining mid-utterance).
    public var showingVolatile: RecognitionResult? { assembler.showingVolatile }

    /// Whether results carry words (the start request's `words`).
    public var includesWords: Bool { request?.words ?? true }

    /// Monotonic time the `start` was accepted, once it was.
    public var startedMonotonic: Double? { isStarted || isClosed && request != nil ? startedMonotonicTime : nil }

    /// Whether the machine has asked for the socket not to be read (inbound backpressure).
    public private(set) var isReadingPaused = false

    // MARK: Inputs

    /// Applies one input; returns what the server must do, in order.
    public mutating func handle(_ input: SessionInput) -> [SessionAction] {
        if isClosed { return [] }
        var out: [SessionAction] = []
        let parser = messageParser
        switch input {
        case .text(let text, let now, let wallClock):
            receiveText(byteCount: text.utf8.count, now: now, wallClock: wallClock, into: &out) { () throws(StenoError) in
                try ClientMessage.parse(text, parser: parser)
            }
        case .textBytes(let bytes, let now, let wallClock):
            receiveText(byteCount: bytes.count, now: now, wallClock: wallClock, into: &out) { () throws(StenoError) in
                try ClientMessage.parse(utf8: bytes, parser: parser)
            }
        case .audio(let bytes, let now):
            receiveAudio(bytes, now: now, into: &out)
        case .frameTooLarge(let bytes):
            fail(.tooLarge, "a frame of \(bytes) bytes is over the limit of \(configuration.limits.maxFrameBytes) bytes",
                 into: &out)
        case .results(let events, let analyzedThrough, let now):
            receiveResults(events, analyzedThrough: analyzedThrough, now: now, into: &out)
        case .finalizeCompleted:
            completeFinalize(into: &out)
        case .endCompleted:
            completeEnd(into: &out)
        case .pipelineWarning(let error):
            guard isStarted else { break }
            if error.code.isFatal {
                fail(error.code, error.message, into: &out)
            } else {
                emit(.error(error), into: &out)
            }
        case .pipelineFailed(let message):
            fail(.internal, message.isEmpty ? "internal error" : message, into: &out)
        case .tick(let now):
            tick(now: now, into: &out)
        case .shutdown:
            switch stage {
            case .awaitingStart: fail(.shuttingDown, Self.shutdownMessage, into: &out)
            case .open: windDown(.shuttingDown, into: &out)
            case .ending, .closed: break
            }
        case .shutdownDeadline:
            fail(.shuttingDown, Self.shutdownMessage, into: &out)
        case .outboundOverflow:
            if isDetached {
                // Nobody reads because nobody is there. The audio received is analyzed to its
                // end, for the channel, as when the grace period runs out.
                resumeForfeited = true
                if case .open = stage { windDown(.abandoned, into: &out) }
            } else {
                fail(.slowConsumer,
                     "the client is not reading: over \(configuration.limits.outboundBytes) bytes of events unsent",
                     into: &out)
            }
        case .peerClosed:
            disconnect(into: &out)
        case .connectionLost(let now):
            if isStarted && resumeToken != nil {
                if detachedSince == nil { detachedSince = now }
            } else {
                disconnect(into: &out)
            }
        case .attached(let now):
            guard isDetached else { break }
            detachedSince = nil
            lastActivity = max(lastActivity, now)
            emit(.resumed(session: id, received: receivedSeconds), into: &out)
            // The new connection is read from the start: hold it back too if this one was.
            if isReadingPaused { out.append(.pauseReading) }
        case .resumeRejected(let why):
            fail(.resumeFailed, why, into: &out)
        }
        return out
    }

    /// The peer is gone for good: stop everything, send nothing.
    private mutating func disconnect(into out: inout [SessionAction]) {
        if isStarted { out.append(.cancelPipeline) }
        assembler.discardVolatile()
        detachedSince = nil
        stage = .closed(.disconnected)
    }

    // MARK: -

    private static let shutdownMessage = "the server is shutting down"

    /// Client messages are shallow; their size is bounded by the frame limit (checked first).
    private var messageParser: JSONParser {
        JSONParser(maxDepth: 16, maxBytes: max(configuration.limits.maxFrameBytes, 1))
    }

    private var isStarted: Bool {
        switch stage {
        case .open, .ending: return true
        case .awaitingStart, .closed: return false
        }
    }

    private mutating func emit(_ event: ServerEvent, into out: inout [SessionAction]) {
        out.append(.send(event.encoded()))
    }

    /// Fatal error: cancel the pipeline, send the error, close with its code.
    private mutating func fail(_ code: ErrorCode, _ message: String, into out: inout [SessionAction]) {
        if isStarted { out.append(.cancelPipeline) }
        pendingFinalizes.removeAll()
        stage = .closed(.failed(code))
        emit(.error(StenoError(code, message)), into: &out)
        closeConnection(into: &out)
    }

    /// The close the phase just reached asks for (`SessionPhase.close` owns the codes).
    private func closeConnection(into out: inout [SessionAction]) {
        if let close = phase.close { out.append(.close(code: close.code, reason: close.reason)) }
    }

    private mutating func receiveText(byteCount: Int, now: Double, wallClock: UTCTime,
                                      into out: inout [SessionAction],
                                      parse: () throws(StenoError) -> ClientMessage) {
        lastActivity = max(lastActivity, now)
        guard byteCount <= configuration.limits.maxFrameBytes else {
            fail(.tooLarge, "a text frame of \(byteCount) bytes is over the limit of \(configuration.limits.maxFrameBytes) bytes",
                 into: &out)
            return
        }
        let message: ClientMessage
        do {
            message = try parse()
        } catch {
            switch error.code {
            case .unsupportedAudio where isStarted:
                // A second start, however malformed its audio.
                fail(.notStarted, "the session has already started; \"start\" may only come first", into: &out)
            case let code where code.isFatal:
                fail(code, error.message, into: &out)
            default:
                emit(.error(error), into: &out)
            }
            return
        }

        switch (stage, message) {
        case (.closed, _):
            return
        case (.awaitingStart, .start(let request)):
            accept(request, now: now, wallClock: wallClock, into: &out)
        case (.awaitingStart, .resume(let request)):
            out.append(.resume(request))
        case (.awaitingStart, _):
            fail(.notStarted, "\"\(message.typeName)\" before \"start\"; start must be the first message", into: &out)
        case (_, .start), (_, .resume):
            fail(.notStarted, "the session has already started; \"\(message.typeName)\" may only come first", into: &out)
        case (_, .cancel):
            cancel(into: &out)
        case (.open, .finalize(let through)):
            let received = receivedSeconds
            let t = TranscriptAssembler.quantize(min(through ?? received, received), otherwise: received)
            pendingFinalizes.append(t)
            out.append(.submitFinalize(through: t))
        case (.open, .end):
            stage = .ending(.requested)
            out.append(.submitEnd)
        case (.open, .gap(let duration)):
            let start = receivedSeconds
            let units = max(1, Int64((duration * unitRate).rounded()))
            receivedUnits += units
            out.append(.submitGap(start: Double(receivedUnits - units) / unitRate, duration: Double(units) / unitRate))
            emit(.gap(start: start, end: receivedSeconds), into: &out)
            regulateReading(now: now, into: &out)
        case (.open, .silence(let duration)):
            let units = max(1, Int64((duration * unitRate).rounded()))
            receivedUnits += units
            lastActivity = max(lastActivity, now)
            out.append(.submitGap(start: Double(receivedUnits - units) / unitRate, duration: Double(units) / unitRate))
            regulateReading(now: now, into: &out)
        case (.ending(.requested), .silence):
            if !warnedAudioAfterEnd {
                warnedAudioAfterEnd = true
                emit(.error(StenoError(.badMessage, "audio after \"end\" is ignored")), into: &out)
            }
        case (.ending, .silence):
            break
        case (.ending, .gap):
            emit(.error(StenoError(.badMessage, "the session is ending; \"gap\" is ignored")), into: &out)
        case (.ending, .finalize):
            emit(.error(StenoError(.badMessage, "the session is ending; \"finalize\" is ignored")), into: &out)
        case (.ending, .end):
            emit(.error(StenoError(.badMessage, "the session is already ending; \"end\" is ignored")), into: &out)
        }
    }

    private mutating func accept(_ request: StartRequest, now: Double, wallClock: UTCTime,
                                 into out: inout [SessionAction]) {
        let chosen: ServedModel
        switch Self.model(for: request, among: configuration.models) {
        case .success(let model): chosen = model
        case .failure(let error):
            emit(.error(error), into: &out)
            return
        }
        if let vocabulary = request.vocabulary, !chosen.phones.isEmpty,
           let error = vocabulary.unknownPhones(in: chosen.phones) {
            emit(.error(error), into: &out)
            return
        }
        var request = request
        request.model = chosen.engine.model
        self.request = request
        assembler = TranscriptAssembler(options: .init(volatile: request.volatile, words: request.words,
                                                       format: request.format,
                                                       profanity: request.profanity ?? configuration.profanity))
        unitRate = request.audio.encoding == .opus ? Double(OpusPacket.sampleRate) : Double(request.audio.sampleRate)
        startedAt = wallClock
        startedMonotonicTime = now
        stage = .open
        out.append(.startPipeline(request))
        emit(.ready(ReadyInfo(session: id, startedAt: wallClock, engine: chosen.engine,
                              limits: configuration.limits, resumeToken: resumeToken)), into: &out)
    }

    /// The model a `start` asks for: by name, else the first that serves its language, else
    /// the default; a `bad_message` naming what this server has otherwise.
    static func model(for request: StartRequest, among models: [ServedModel]) -> Result<ServedModel, StenoError> {
        if let name = request.model {
            guard let model = models.first(where: { $0.engine.model == name }) else {
                return .failure(StenoError(.badMessage, "model \"\(clippedForError(name))\" is not available; this server has "
                    + models.map(\.engine.model).joined(separator: ", ") + " (see /v1/models)"))
            }
            if let language = request.language, !LanguageTag.serves(model.engine.language, requested: language) {
                return .failure(StenoError(.badMessage,
                    "model \"\(name)\" recognizes \(model.engine.language), not \"\(clippedForError(language))\""))
            }
            return .success(model)
        }
        if let language = request.language {
            guard let model = models.first(where: { LanguageTag.serves($0.engine.language, requested: language) }) else {
                var served: [String] = []
                for model in models where !served.contains(model.engine.language) { served.append(model.engine.language) }
                return .failure(StenoError(.badMessage,
                    "language \"\(clippedForError(language))\" is not available; this server recognizes \(served.joined(separator: ", "))"))
            }
            return .success(model)
        }
        return .success(models[0])
    }

    private mutating func cancel(into out: inout [SessionAction]) {
        let through = analyzedSeconds
        assembler.discardVolatile()
        pendingFinalizes.removeAll()
        stage = .closed(.cancelled)
        out.append(.cancelPipeline)
        emit(.cancelled(through: through), into: &out)
        closeConnection(into: &out)
    }

    private mutating func receiveAudio(_ bytes: [UInt8], now: Double, into out: inout [SessionAction]) {
        lastActivity = max(lastActivity, now)
        let limit = configuration.limits.maxFrameBytes
        guard bytes.count <= limit else {
            fail(.tooLarge, "an audio frame of \(bytes.count) bytes is over the limit of \(limit) bytes", into: &out)
            return
        }
        guard let format = request?.audio else {
            fail(.notStarted, "audio before \"start\"; start must be the first message", into: &out)
            return
        }
        switch stage {
        case .open:
            break
        case .ending(.requested):
            if !warnedAudioAfterEnd {
                warnedAudioAfterEnd = true
                emit(.error(StenoError(.badMessage, "audio after \"end\" is ignored")), into: &out)
            }
            return
        case .awaitingStart, .ending, .closed:
            return
        }
        let start = Double(receivedUnits) / unitRate
        if let bytesPerFrame = format.bytesPerFrame {
            guard bytes.count % bytesPerFrame == 0 else {
                emit(.error(StenoError(.badAudio,
                    "a \(format.encoding.rawValue) frame must hold whole sample frames of \(bytesPerFrame) bytes; "
                    + "\(bytes.count) bytes dropped")), into: &out)
                return
            }
            let frames = bytes.count / bytesPerFrame
            guard frames > 0 else { return }
            receivedUnits += Int64(frames)
            out.append(.submitAudio(AudioChunk(bytes: bytes, start: start,
                                               duration: Double(frames) / unitRate)))
            regulateReading(now: now, into: &out)
        } else {
            let samples: Int
            let malformed: Bool
            if let good = OpusPacket.samples(bytes) {
                samples = good
                malformed = false
                lastOpusSamples = good
            } else {
                samples = lastOpusSamples
                malformed = true
            }
            receivedUnits += Int64(samples)
            out.append(.submitAudio(AudioChunk(bytes: bytes, start: start, duration: Double(samples) / unitRate,
                                               headerIsMalformed: malformed)))
            regulateReading(now: now, into: &out)
            if malformed {
                emit(.error(StenoError(.badAudio,
                    "an Opus packet of \(bytes.count) bytes has an unreadable header; concealed")), into: &out)
            }
        }
    }

    private mutating func receiveResults(_ events: [TranscriberEvent], analyzedThrough: Double?, now: Double,
                                         into out: inout [SessionAction]) {
        guard isStarted else { return }
        for produced in assembler.consume(events) { emit(produced, into: &out) }
        if let through = analyzedThrough, through.isFinite {
            let clamped = min(through, Double(receivedUnits) / unitRate)
            if clamped > analyzed {
                analyzed = clamped
                lastActivity = max(lastActivity, now)
            }
        }
        regulateReading(now: now, into: &out)
    }

    /// Inbound backpressure: at `limits.bufferSeconds` of audio waiting for analysis the
    /// socket stops being read; it is read again once the backlog is down to half (so reading
    /// is not toggled on every frame). Audio that still arrives while paused (already in
    /// socket or library buffers) is accepted, never refused. While paused the client cannot
    /// be idle (what it sends waits unread, and the wait is the server's): the idle timeout
    /// counts again from the resume.
    private mutating func regulateReading(now: Double, into out: inout [SessionAction]) {
        let highWater = max(0.1, configuration.limits.bufferSeconds)
        let backlog = backlogSeconds
        if !isReadingPaused && backlog >= highWater {
            isReadingPaused = true
            out.append(.pauseReading)
        } else if isReadingPaused && backlog <= highWater / 2 {
            isReadingPaused = false
            lastActivity = max(lastActivity, now)
            out.append(.resumeReading)
        }
    }

    private mutating func completeFinalize(into out: inout [SessionAction]) {
        guard isStarted, !pendingFinalizes.isEmpty else { return }
        let through = pendingFinalizes.removeFirst()
        for event in assembler.clearVolatile(before: through) { emit(event, into: &out) }
        emit(.finalized(through: through), into: &out)
    }

    private mutating func completeEnd(into out: inout [SessionAction]) {
        guard case .ending(let reason) = stage else { return }
        // End implies every earlier finalize is done too.
        while !pendingFinalizes.isEmpty { completeFinalize(into: &out) }
        for event in assembler.clearVolatile() { emit(event, into: &out) }
        if reason == .abandoned {
            // Nobody to tell: the finals went to the channel, if any.
            detachedSince = nil
            stage = .closed(.disconnected)
        } else if let code = reason.errorCode {
            stage = .closed(.failed(code))
            emit(.error(StenoError(code, endMessage(reason))), into: &out)
            closeConnection(into: &out)
        } else {
            stage = .closed(.ended)
            emit(.ended(duration: receivedSeconds), into: &out)
            closeConnection(into: &out)
        }
    }

    private func endMessage(_ reason: EndReason) -> String {
        let limits = configuration.limits
        switch reason {
        case .requested: return "ended"
        case .sessionLimit: return "the session reached its maximum duration of \(seconds(limits.maxSessionSeconds)) s"
        case .idle: return "no audio and no message for \(seconds(limits.idleTimeoutSeconds)) s"
        case .shuttingDown: return Self.shutdownMessage
        case .abandoned: return "the connection dropped and was not resumed"
        }
    }

    private func seconds(_ value: Double) -> String { JSONWriter.secondsText(value) }

    /// Ends input on the server's initiative: finalize, then close with the reason's error.
    private mutating func windDown(_ reason: EndReason, into out: inout [SessionAction]) {
        stage = .ending(reason)
        out.append(.submitEnd)
    }

    /// The earliest monotonic time at which a `.tick` could do anything: a deadline of `tick`
    /// below (start, idle, session limit, resume) or a `progress` owed because received or
    /// analyzed moved. Before it, a tick is a no-op, so a server with thousands of quiet
    /// sessions need only tick each one when this comes (or after its next input, which may
    /// move it): `infinity` when only an input can give a tick something to do. It may be
    /// early (a tick then does nothing), never late; it mirrors `tick`'s conditions one for one.
    public var nextTickDue: Double {
        let limits = configuration.limits
        let idleDue = limits.idleTimeoutSeconds > 0 && detachedSince == nil && !isReadingPaused
            ? lastActivity + limits.idleTimeoutSeconds : .infinity
        var due = Double.infinity
        switch stage {
        case .awaitingStart:
            if limits.startTimeoutSeconds > 0 { due = openedMonotonic + limits.startTimeoutSeconds }
            return min(due, idleDue)
        case .open:
            if limits.maxSessionSeconds > 0 { due = startedMonotonicTime + limits.maxSessionSeconds }
            if let since = detachedSince { due = min(due, since + limits.resumeSeconds) }
            if pendingFinalizes.isEmpty { due = min(due, idleDue) }
        case .ending:
            break
        case .closed:
            return .infinity
        }
        if receivedSeconds != lastProgressReceived || analyzedSeconds != lastProgressAnalyzed {
            due = min(due, lastProgressAt + configuration.progressInterval)
        }
        return due
    }

    private mutating func tick(now: Double, into out: inout [SessionAction]) {
        let limits = configuration.limits
        // Each deadline is compared as `nextTickDue` computes it (x + T, not now − x), so a tick
        // at the due time acts whatever the rounding.
        let idleExpired = limits.idleTimeoutSeconds > 0 && now >= lastActivity + limits.idleTimeoutSeconds
            && detachedSince == nil && !isReadingPaused
        switch stage {
        case .awaitingStart:
            if limits.startTimeoutSeconds > 0 && now >= openedMonotonic + limits.startTimeoutSeconds {
                fail(.idle, "no \"start\" message within \(seconds(limits.startTimeoutSeconds)) s of connecting", into: &out)
            } else if idleExpired {
                fail(.idle, "no \"start\" message for \(seconds(limits.idleTimeoutSeconds)) s", into: &out)
            }
            return
        case .open:
            if limits.maxSessionSeconds > 0 && now >= startedMonotonicTime + limits.maxSessionSeconds {
                windDown(.sessionLimit, into: &out)
            } else if let since = detachedSince, now >= since + limits.resumeSeconds {
                windDown(.abandoned, into: &out)
            } else if idleExpired && pendingFinalizes.isEmpty {
                windDown(.idle, into: &out)
            }
        case .ending:
            break
        case .closed:
            return
        }
        // Progress while audio flows or analysis catches up.
        guard now >= lastProgressAt + configuration.progressInterval else { return }
        let received = receivedSeconds
        let analyzedNow = analyzedSeconds
        guard received != lastProgressReceived || analyzedNow != lastProgressAnalyzed else { return }
        lastProgressAt = now
        lastProgressReceived = received
        lastProgressAnalyzed = analyzedNow
        emit(.progress(received: received, analyzed: analyzedNow), into: &out)
    }
}
