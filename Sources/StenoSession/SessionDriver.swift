// The one session driver: what turns StenoCore's `SessionMachine` and a `TranscriptionPipeline`
// into a running session, for `steno serve` (a connection, its jobs on a worker lane) and for
// `steno transcribe` (a file, its jobs in the calling thread). Its host (`SessionDriver`'s
// requirements) is what differs: where events go, reading paused and resumed, the close, the
// channel, metrics. This file has the state and the inputs; how actions are carried out is in
// SessionDriver+Actions.swift, the tick, audio batches and stalls in SessionDriver+Clock.swift,
// the pipeline's jobs in SessionDriver+Pipeline.swift.

import StenoCore
import StenoSpeech
import StenoSystem

/// How a driver runs a session (what its host chooses).
public struct DriverOptions: Sendable, Hashable {
    /// Audio goes to the pipeline in batches of this many seconds (the recognizer analyzes
    /// 2048-sample blocks, 0.128 s: waking a worker for less mostly finds nothing to analyze);
    /// 0: each message as it comes (a file, or a benchmark of what batching saves).
    public var batchSeconds: Double
    /// A batch left short (the client paused, or sends little) goes after this long anyway.
    public var batchLinger: Double
    /// Recognizers keep a shared decoder from their first utterance to their end (the design
    /// before shared decoders, for comparison: `ServerOptions.dedicatedRecognizers`).
    public var keepsDecoder: Bool

    public init(batchSeconds: Double = 0.128, batchLinger: Double = 0.1, keepsDecoder: Bool = false) {
        self.batchSeconds = batchSeconds
        self.batchLinger = batchLinger
        self.keepsDecoder = keepsDecoder
    }

    /// A file in one thread: nothing to batch, nothing lingers.
    public static let inline = DriverOptions(batchSeconds: 0, batchLinger: 0)
}

/// What a session keeps under its lock: the protocol (`machine`), the host's own part
/// (`local`), and the driver's.
public struct SessionState<Local> {
    /// The protocol: what was received and analyzed, the phase, and how the session closed.
    public var machine: SessionMachine
    /// What the host keeps of the session (the server: its connection, channel, held events).
    public var local: Local
    /// Monotonic time the client's `end` was submitted (for the end-to-`ended` latency).
    public internal(set) var endSubmittedAt: Double?
    /// Audio received and not yet handed to the pipeline, in one batch.
    var batch = AudioBatch()
    /// Whether the recognizer says speech is going on (between `speechStarted` and
    /// `speechEnded`): while it is, the session may hold one of the shared decoders.
    var speaking = false
    /// Monotonic time since when the client has sent nothing it could have: audio (or a
    /// declared gap or silence) last came in, or a `finalize` it was waiting for completed.
    var quietSince: Double
    /// The stalled utterance was finalized; nothing more until audio comes again.
    var stallReleased = false
    /// Audio (or a gap or silence) came since the last tick: the session is a talker.
    var heardSinceVisit = false
    /// The host was told the protocol closed (`protocolClosed`), and the pipeline was handed
    /// to its executor to be freed there.
    var closeCarriedOut = false
    /// The due time last given to the host (`schedule`), while it stands; nil once a tick took it.
    var scheduledAt: Double?
    /// A `resume` the client asked for, carried out once the lock is let go.
    var resumeRequest: ResumeRequest?

    init(machine: SessionMachine, local: Local, now: Double) {
        self.machine = machine
        self.local = local
        self.quietSince = now
    }
}

/// Audio received and not yet handed to the pipeline: it goes in batches (`DriverOptions`), so
/// a worker is woken once per recognizer block rather than per message.
struct AudioBatch {
    var chunks: [AudioChunk] = []
    var seconds = 0.0
    /// Monotonic time its first chunk came.
    var since = 0.0
    /// Where on the session timeline the recognizer's next analysis block is complete (as the
    /// pipeline last said): the batch goes when the audio received reaches it, so the block is
    /// analyzed — and an utterance that ended in it is final — without waiting for the batch to
    /// fill. Nil until the pipeline says again (after each batch handed over).
    var flushAt: Double?

    var isEmpty: Bool { chunks.isEmpty }

    /// Whether the audio received through `time` (a chunk's `end`) completes the recognizer's
    /// next block: both are whole samples of the same count, so they compare exactly.
    func completesBlock(through time: Double) -> Bool {
        guard let at = flushAt else { return false }
        return time >= at
    }

    mutating func take() -> [AudioChunk] {
        defer {
            chunks.removeAll(keepingCapacity: true)
            seconds = 0
            flushAt = nil
        }
        return chunks
    }
}

/// A session's parts that every driver has: its state under one lock, where its jobs run, its
/// pipeline (touched only by those jobs), the engine, the clock and the options.
public final class SessionCore<Local>: Sendable {
    let state: Locked<SessionState<Local>>
    public let executor: any PipelineExecutor
    let work: PipelineLocal<PipelineWork>
    let engine: any SpeechEngine
    public let clock: any TimeSource
    public let options: DriverOptions

    public init(machine: SessionMachine, local: sending Local, engine: any SpeechEngine, executor: any PipelineExecutor,
                clock: any TimeSource, options: DriverOptions) {
        self.state = Locked(SessionState(machine: machine, local: local, now: clock.now()))
        self.executor = executor
        self.work = PipelineLocal(PipelineWork(), executor: executor)
        self.engine = engine
        self.clock = clock
        self.options = options
    }

    /// Reads the state under the lock (nothing the driver must hear of may change here).
    public func read<R>(_ body: (SessionState<Local>) -> R) -> R { state.withLock { body($0) } }
}

/// The pipeline and what its jobs owe the machine, touched only by the executor's jobs.
struct PipelineWork {
    var pipeline: TranscriptionPipeline?
    /// The completions (`finalizeCompleted`, `endCompleted`) of requests whose finals have not
    /// come yet: the recognizer waits (for a shared decoder, or its engine's answer).
    var owed: [SessionInput] = []
    /// How much of the recognizer's `engineSeconds` the executor has been charged.
    var engineCharged = 0.0
}

/// Something a host counts or logs (called from any thread, sometimes under the session's lock:
/// keep it cheap and take no lock that could wait for a session).
public enum SessionNote: Sendable {
    /// Audio accepted for the pipeline.
    case audioAccepted(seconds: Double)
    /// The session's recognizer and pipeline were made.
    case pipelineMade(opus: Bool)
    /// The recognizer could not be made, or the pipeline failed (the session ends `internal`).
    case pipelineFailed(starting: Bool, message: String)
    /// An utterance stalled in the middle of speech was made final after `silentSeconds`.
    case stallFinalized(silentSeconds: Double)
    /// A final's latency broken into its parts (`DriverHost.logsLatency`).
    case latency(String)
}

/// The session driver. A host conforms and gets, from this protocol's extensions, the inputs
/// (`input`), the tick (`tick`), and the running of the pipeline; it gives the parts that are
/// its own: where events go (`deliver`), what starting means beyond the pipeline (`starting`),
/// reading, closing, and what it counts.
///
/// The machine and the host's state are under one lock (the session's), and actions are
/// carried out under it: events reach the host in order, and audio reaches the executor in
/// arrival order, whichever thread produced them. Nothing done under it blocks.
public protocol SessionDriver: AnyObject, Sendable {
    associatedtype Local
    var core: SessionCore<Local> { get }

    /// Under the lock: delivers one event. Returns what the machine says to do if it did not
    /// fit (`outboundOverflow`), else nothing.
    func deliver(_ event: EncodedEvent, _ s: inout SessionState<Local>) -> [SessionAction]
    /// Under the lock, after the actions of one input were carried out: what the host held back
    /// for the end of the batch is delivered; returns what the machine says if it did not fit.
    func performed(_ s: inout SessionState<Local>) -> [SessionAction]
    /// Under the lock: the pipeline starts for `request`; returns what else the machine says
    /// (e.g. a warning that the request's channel is taken).
    func starting(_ request: StartRequest, _ s: inout SessionState<Local>) -> [SessionAction]
    /// Under the lock: stop (false) or go on (true) reading the client.
    func setReading(_ reading: Bool, _ s: inout SessionState<Local>)
    /// Under the lock: close the connection with `code` after the events queued.
    func close(code: UInt16, reason: String, _ s: inout SessionState<Local>)
    /// Under the lock, once: the protocol has closed (nothing more is published).
    func protocolClosed(_ s: inout SessionState<Local>)
    /// Under the lock: the pipeline's results were taken (analysis may have moved).
    func analyzed(_ s: inout SessionState<Local>)
    /// Under the lock: when the session next wants `tick` changed (`-infinity`: at the next
    /// tick; `infinity`: only an input can change that).
    func schedule(at due: Double, _ s: inout SessionState<Local>)
    /// When a closed session next wants a tick (the server: at the next one once its
    /// connection is gone, to forget it); `infinity`: never.
    func closedWakeAt(_ s: SessionState<Local>) -> Double
    /// Outside the lock: the client asked to resume another session.
    func resume(_ request: ResumeRequest)
    /// Something to count or log.
    func note(_ note: SessionNote)
    /// Whether finals' latencies are worth a `note(.latency)` (a debug log is on).
    var logsLatency: Bool { get }
}

extension SessionDriver {
    public func schedule(at due: Double, _ s: inout SessionState<Local>) {}
    public func resume(_ request: ResumeRequest) {}
    public func closedWakeAt(_ s: SessionState<Local>) -> Double { .infinity }
    public func analyzed(_ s: inout SessionState<Local>) {}
    public func performed(_ s: inout SessionState<Local>) -> [SessionAction] { [] }
    public var logsLatency: Bool { false }

    // MARK: Inputs

    /// Runs the machine on `inputs`, in order, and carries out the actions.
    public func input(_ inputs: SessionInput...) {
        let resume = mutate { s -> ResumeRequest? in
            for input in inputs {
                perform(s.machine.handle(input), &s)
            }
            defer { s.resumeRequest = nil }
            return s.resumeRequest
        }
        if let resume { self.resume(resume) }
    }

    /// A text frame from the client, at the clock's time.
    public func receivedText(_ text: String) {
        input(.text(text, now: core.clock.now(), wallClock: core.clock.wall()))
    }

    /// A binary frame (audio) from the client, at the clock's time.
    public func receivedAudio(_ bytes: [UInt8]) {
        input(.audio(bytes, now: core.clock.now()))
    }

    /// Runs `body` under the session's lock, then tells the host when the session next needs a
    /// tick if that changed: every change that can move a deadline, start or stop a talker, or
    /// leave a batch comes through here.
    public func mutate<R>(_ body: (inout SessionState<Local>) -> R) -> R {
        core.state.withLock { s in
            let result = body(&s)
            let due = wakeAt(s)
            if due != s.scheduledAt {
                schedule(at: due, &s)
                s.scheduledAt = due
            }
            return result
        }
    }

    /// Runs the machine on inputs from the pipeline and carries out the actions; `nextBlock`:
    /// where the recognizer's next block will be complete, on the session timeline.
    func pipelineInput(_ inputs: [SessionInput], nextBlock: Double?) {
        mutate { s in
            s.batch.flushAt = nextBlock
            // The audio that completes it may have come while the pipeline worked.
            if let last = s.batch.chunks.last, s.batch.completesBlock(through: last.end) {
                submitBatch(&s)
            }
            for input in inputs {
                if case .results(let events, _, _) = input {
                    for event in events {
                        switch event {
                        case .speechStarted: s.speaking = true
                        case .speechEnded: s.speaking = false
                        default: break
                        }
                    }
                }
                // The client may have waited for it (`stallDue`).
                if case .finalizeCompleted = input { s.quietSince = core.clock.now() }
                perform(s.machine.handle(input), &s)
            }
            analyzed(&s)
        }
    }
}
