import StenoCore
import StenoSpeech
import StenoSystem

/// One session run in the calling thread: the session driver (StenoCore's `SessionMachine`
/// driving a `TranscriptionPipeline`) with its jobs run inline, and no sockets. `steno
/// transcribe`, the benchmarks and the pipeline tests use it; the server runs the same driver
/// with its jobs on a worker lane.
///
/// Inputs are the wire protocol's: a `start` text, binary audio frames, `finalize`, `end`,
/// `cancel`. Out come the wire events, exactly as a client would receive them. Each call returns
/// once what it started is done (if the recognizer waits for a shared decoder, the call waits).
///
/// Not `Sendable`: use it from one thread.
public final class LocalSession {
    /// Called with each event as it is sent (after the call that made it has done its work).
    public var onEvent: ((EncodedEvent) -> Void)?

    private let driver: LocalDriver
    private let executor = InlineExecutor()

    /// A session on `engine`. Limits that depend on wall time (idle, session length) are off
    /// unless given: a file is not a live stream.
    public init(engine: any SpeechEngine, limits: SessionLimits? = nil, id: String = "local",
                clock: any TimeSource = SystemTime()) {
        var configuration = SessionConfiguration(
            engine: engine.info.announced,
            limits: limits ?? SessionLimits(maxSessionSeconds: 0, idleTimeoutSeconds: 0, startTimeoutSeconds: 0))
        configuration.models = engine.servedModels
        let machine = SessionMachine(id: id, configuration: configuration, now: clock.now())
        driver = LocalDriver(core: SessionCore(machine: machine, local: LocalDriver.Record(), engine: engine,
                                               executor: executor, clock: clock, options: .inline))
    }

    /// Every event sent so far, in order, numbered as a client receives them (a local session
    /// is its own connection: this is where its `seq` comes from).
    public var events: [EncodedEvent] { driver.core.read { $0.local.events } }
    /// The close code, once the session has closed.
    public var closeCode: UInt16? { driver.core.read { $0.local.closeCode } }
    /// The finals so far.
    public var finals: [RecognitionResult] { driver.core.read { $0.machine.finals } }
    /// Where the session is.
    public var phase: SessionPhase { driver.core.read { $0.machine.phase } }
    /// Seconds of audio received.
    public var receivedSeconds: Double { driver.core.read { $0.machine.receivedSeconds } }

    /// A text frame from the client (`start`, `finalize`, `end`, `cancel`).
    public func send(text: String) {
        driver.receivedText(text)
        settle()
    }

    /// A binary frame from the client (audio).
    public func send(audio: [UInt8]) {
        driver.receivedAudio(audio)
        settle()
    }

    /// Sends `start` for this format, with the request's options; `text` as the wire's
    /// "format", `phrases` (one per item), `boost` and `alternatives` as its "phrases", "boost"
    /// and "alternatives".
    public func start(format: AudioFormat, volatile: Bool = true, words: Bool = true, language: String? = nil,
                      text: TextFormat = .readable, phrases: [String] = [], boost: Double? = nil, alternatives: Int = 0,
                      model: String? = nil) {
        send(text: ClientMessage.startText(format, language: language, model: model, volatile: volatile, words: words,
                                           format: text, phrases: phrases, boost: boost, alternatives: alternatives))
    }

    /// Starts the session with a request made here rather than sent as text (one with what the
    /// wire does not carry: `StartRequest.background`).
    public func start(_ request: StartRequest) {
        driver.input(.message(.start(request), now: driver.core.clock.now(), wallClock: driver.core.clock.wall()))
        settle()
    }

    /// Sends `end` (finals, then `ended`, then the close).
    public func end() { send(text: #"{"type":"end"}"#) }

    /// Runs the jobs the input queued (waiting while the recognizer waits), then hands the new
    /// events to `onEvent`, outside the session's lock (it may read the session).
    private func settle() {
        executor.runUntilIdle()
        let fresh = driver.core.state.withLock { s in
            defer { s.local.unannounced = s.local.events.count }
            return s.local.events[s.local.unannounced...]
        }
        if let onEvent { for event in fresh { onEvent(event) } }
    }
}

/// The host of a local session: its events numbered in a list, nothing to read or pause.
final class LocalDriver: SessionDriver, @unchecked Sendable {
    // Safety: the state is the core's, under its lock; the driver has nothing else.
    struct Record {
        var events: [EncodedEvent] = []
        /// Events not yet handed to `LocalSession.onEvent`.
        var unannounced = 0
        var closeCode: UInt16?
    }

    let core: SessionCore<Record>

    init(core: SessionCore<Record>) {
        self.core = core
    }

    func deliver(_ event: EncodedEvent, _ s: inout SessionState<Record>) -> [SessionAction] {
        s.local.events.append(event.numbered(UInt64(s.local.events.count + 1)))
        return []
    }

    func starting(_ request: StartRequest, _ s: inout SessionState<Record>) -> [SessionAction] { [] }
    // The caller feeds audio in its own thread, at its own pace.
    func setReading(_ reading: Bool, _ s: inout SessionState<Record>) {}
    func close(code: UInt16, reason: String, _ s: inout SessionState<Record>) { s.local.closeCode = code }
    func protocolClosed(_ s: inout SessionState<Record>) {}
    func note(_ note: SessionNote) {}

    func resume(_ request: ResumeRequest) {
        input(.resumeRejected("a local session has nothing to resume"))
    }
}
