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
//
// This file holds the machine's state, what the server may read of it, and `handle`, which
// takes each input to its part: text messages in SessionMachine+Messages.swift, audio and
// analysis in SessionMachine+Audio.swift, the end of finalizes and of the session in
// SessionMachine+Ending.swift, and the clock in SessionMachine+Clock.swift. What a session is
// configured with is in SessionConfiguration.swift, its inputs and actions in SessionIO.swift,
// and its phases in SessionPhase.swift.

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
    public internal(set) var request: StartRequest?
    /// Wall-clock time the session started (the `ready` event's `startedAt`).
    public internal(set) var startedAt: UTCTime?

    enum Stage: Sendable {
        case awaitingStart
        case open
        case ending(EndReason)
        case closed(SessionPhase)
    }

    var stage: Stage = .awaitingStart
    /// Since when the session has had no connection (resumable), or nil while it has one.
    var detachedSince: Double?
    /// What `ready` tells the client to resume with; nil when sessions cannot be resumed.
    let resumeToken: String?
    /// More events were made while detached than are held for the client: a resume would
    /// miss some, so none is granted.
    public private(set) var resumeForfeited = false
    var assembler = TranscriptAssembler()
    /// `through` of each outstanding finalize, oldest first.
    var pendingFinalizes: [Double] = []
    /// Audio received, in samples at `unitRate` (the PCM rate, or 48 kHz for Opus).
    var receivedUnits: Int64 = 0
    var unitRate: Double = 1
    var analyzed: Double = 0
    var lastOpusSamples: Int
    var lastActivity: Double
    /// When the connection opened (the `start` deadline runs from here).
    let openedMonotonic: Double
    var startedMonotonicTime: Double = 0
    var lastProgressAt: Double = -Double.infinity
    var lastProgressReceived: Double = 0
    var lastProgressAnalyzed: Double = 0
    var warnedAudioAfterEnd = false

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

    /// The finals sent so far (with words): the session's transcript (`TranscriptAssembler.finals`).
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
    public internal(set) var isReadingPaused = false

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
        case .message(let message, let now, let wallClock):
            receiveText(byteCount: 0, now: now, wallClock: wallClock, into: &out) { () throws(StenoError) in message }
        case .activity(let now):
            lastActivity = max(lastActivity, now)
        case .refused(let error):
            fail(error.code.isFatal ? error.code : .unsupportedAudio, error.message, into: &out)
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

    static let shutdownMessage = "the server is shutting down"

    private var messageParser: JSONParser { ClientMessage.reader(maxBytes: configuration.limits.maxFrameBytes) }

    var isStarted: Bool {
        switch stage {
        case .open, .ending: return true
        case .awaitingStart, .closed: return false
        }
    }

    mutating func emit(_ event: ServerEvent, into out: inout [SessionAction]) {
        out.append(.send(event.encoded()))
    }

    /// Fatal error: cancel the pipeline, send the error, close with its code.
    mutating func fail(_ code: ErrorCode, _ message: String, into out: inout [SessionAction]) {
        if isStarted { out.append(.cancelPipeline) }
        pendingFinalizes.removeAll()
        stage = .closed(.failed(code))
        emit(.error(StenoError(code, message)), into: &out)
        closeConnection(into: &out)
    }

    /// The close the phase just reached asks for (`SessionPhase.close` owns the codes).
    func closeConnection(into out: inout [SessionAction]) {
        if let close = phase.close { out.append(.close(code: close.code, reason: close.reason)) }
    }
}
