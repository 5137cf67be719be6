// One live session's I/O around its `SessionMachine`: what `StreamSession` keeps under its
// lock (`State`) and on its lane (`LaneWork`), how it is made, the inputs from the client,
// the lane and a resume, and what the server reads of it. The router's tick and when it is
// due are in StreamSession+Ticks.swift, how the machine's actions are carried out in
// StreamSession+Actions.swift, and the pipeline's jobs on the lane in
// StreamSession+Pipeline.swift.

import StenoAudio
import StenoCore
import StenoSession
import StenoSpeech
import StenoSystem
import StenoTransport
import StenoWorkers
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One `/v1/stream` connection: StenoCore's `SessionMachine` driving a `TranscriptionPipeline`
/// across two threads.
///
/// - The lws service thread feeds it what the client sends (text, audio, too-large frames,
///   the connection closing) and the periodic tick.
/// - The session's worker `Lane` runs the pipeline (recognizer creation on a preparer thread,
///   then decoding and recognition, strictly in order) and feeds back what it produced.
///
/// Both go through `input(_:)`, which runs the machine and carries out its actions under the
/// session's lock. Doing the actions under the lock is what keeps the order: events reach the
/// connection's outbound queue in `seq` order, and audio reaches the lane in arrival order,
/// whichever thread produced them. Nothing done under the lock blocks: queueing an event, a
/// job or a flow-control command each takes another short lock and returns.
/// Lock order: session → transport, session → pool; never the other way.
final class StreamSession: Sendable {
    let sessionID: String
    let remoteAddress: String
    let server: ServerContext
    let lane: Lane
    /// The pipeline and what its jobs owe the machine, touched only by the lane's jobs.
    let work: LaneLocal<LaneWork>

    struct LaneWork {
        var pipeline: TranscriptionPipeline?
        /// The completions (`finalizeCompleted`, `endCompleted`) of requests whose finals have
        /// not come yet: the recognizer waits for a shared decoder.
        var owed: [SessionInput] = []
        /// How much of the recognizer's `engineSeconds` the lane has been charged.
        var engineCharged = 0.0
    }
    let state: Locked<State>
    /// Whether the registry counts this session as live (see `SessionRegistry.liveCount`);
    /// cleared once, when its protocol closes or it leaves the registry.
    private let countedLive = Atomic<Bool>(true)

    struct State: Sendable {
        /// The protocol: what was received and analyzed, the phase, and how the session closed.
        var machine: SessionMachine
        /// The connection the session's events go to; nil while it is detached (its client
        /// may resume it on a new connection).
        var connection: ConnectionID?
        /// What the last connection left unsent or perhaps unreceived, while detached.
        var backlog: OutboundBacklog?
        /// Events made while detached, for the client that resumes.
        var held: OutboundQueue<OutgoingMessage>
        /// Monotonic time the client's `end` was submitted (for the end-to-`ended` latency).
        var endSubmittedAt: Double?
        var openedAt: Double
        /// How much of `machine.analyzedSeconds` the process-wide counter has been given.
        var analyzedCounted = 0.0
        var maxLag = 0.0
        /// The channel this session publishes to, until it closes.
        var channel: String?
        /// A `resume` this connection's client asked for, to be looked at once the lock is let go.
        var resumeRequest: ResumeRequest?
        /// Audio received and not yet handed to the lane: it goes in batches of about one
        /// recognizer block, so a worker is woken once per block rather than per message.
        var batch: [AudioChunk] = []
        var batchSeconds = 0.0
        var batchSince = 0.0
        /// Where on the session timeline the recognizer's next analysis block is complete (as
        /// its lane last said): the batch goes when the audio received reaches it, so the block
        /// is analyzed — and an utterance that ended in it is final — without waiting for the
        /// batch to fill. Nil until the lane says again (after each batch handed over).
        var flushAt: Double?
        /// Whether the recognizer says speech is going on (between `speechStarted` and
        /// `speechEnded`): while it is, the session holds one of the shared decoders.
        var speaking = false
        /// Monotonic time since when the client has sent nothing it could have: audio (or a
        /// declared gap or silence) last came in, or a `finalize` it was waiting for completed.
        var quietSince = 0.0
        /// The stalled utterance was finalized; nothing more until audio comes again.
        var stallReleased = false
        /// The session closed and its pipeline was handed to the lane to be freed there.
        var pipelineRetired = false
        /// Audio (or a declared gap or silence) came since the router's tick last visited: the
        /// session is a talker, whose lag the tick samples.
        var heardSinceVisit = false
        /// The due time last given to the registry (`mutate`), while its entry stands: a talker
        /// stays due at the next tick through all its messages, and telling the registry so 50
        /// times a second (a lock, a lookup by id) changed nothing. Nil once the tick has taken
        /// the entry out (`visit`).
        var scheduledAt: Double?
    }

    /// Audio per lane job: the recognizer analyzes 2048-sample blocks (0.128 s), so waking a
    /// worker for less would mostly find nothing to analyze.
    static let batchSeconds = 0.128
    /// A batch left short (the client paused) goes to the lane after this long anyway.
    static let batchLinger = 0.1
    /// Whether audio goes to the lane in batches (always, but for one measurement):
    /// `STENO_BENCH_UNBATCHED` set in the environment hands each message over as it comes, as
    /// before batching, so that `steno-bench connections --wakeups` can measure what batching
    /// saves with the same binary side by side. No option, doc or test offers it.
    static let batchesAudio = getenv("STENO_BENCH_UNBATCHED") == nil

    /// How a session takes the end of its connection.
    enum Departure {
        /// It waits, detached, for its client to resume it.
        case detached
        /// It is over: how it went, for the log and the duration metric.
        case closed(line: String, seconds: Double)
    }

    init(connection: ConnectionID, remoteAddress: String, server: ServerContext, now: Double) {
        self.remoteAddress = remoteAddress
        self.server = server
        self.sessionID = Self.makeID(length: 12)
        self.lane = server.pool.makeLane(label: "session \(sessionID)")
        self.work = LaneLocal(LaneWork(), lane: lane)
        let limits = server.sessionConfiguration.limits
        let machine = SessionMachine(id: sessionID, configuration: server.sessionConfiguration, now: now,
                                     resumeToken: Self.makeID(length: 24))
        self.state = Locked(State(machine: machine, connection: connection,
                                 held: OutboundQueue(byteLimit: limits.outboundBytes), openedAt: now))
        if limits.resumeSeconds > 0 {
            // What the client may not have received when its connection drops is sent again
            // after it resumes: keep what was written recently (in flight is at most a socket's
            // buffers' worth).
            server.handle.retainWritten(connection, bytes: server.resumeRetainedBytes)
        }
    }

    // MARK: Inputs

    /// Runs the machine on `inputs`, in order, and carries out the actions.
    func input(_ inputs: SessionInput...) {
        let resume = mutate { s -> ResumeRequest? in
            for input in inputs {
                perform(s.machine.handle(input), &s)
            }
            defer { s.resumeRequest = nil }
            return s.resumeRequest
        }
        if let resume { self.resume(resume) }
    }

    /// Runs the machine on `inputs` (from the lane) and counts what analysis got through.
    /// `nextBlock`: where the recognizer's next block will be complete, on the session timeline.
    func input(_ inputs: [SessionInput], nextBlock: Double? = nil) {
        mutate { s in
            s.flushAt = nextBlock
            // The audio that completes it may have come while the lane worked.
            if let last = s.batch.last, blockIsIn(s, through: last.start + last.duration) { submitBatch(&s) }
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
                if case .finalizeCompleted = input { s.quietSince = SystemClock.now() }
                perform(s.machine.handle(input), &s)
            }
            let analyzed = s.machine.analyzedSeconds
            if analyzed > s.analyzedCounted {
                server.metrics.audioAnalyzedSeconds.add(analyzed - s.analyzedCounted)
                s.analyzedCounted = analyzed
            }
            s.maxLag = max(s.maxLag, s.machine.backlogSeconds)
            // The channel's live captions (HLS) are settled as far as analysis has got.
            if let channel = s.channel { server.channels.advance(channel, session: sessionID, floor: s.machine.captionFloor) }
        }
    }

    /// A message from the client (lws thread).
    func received(_ message: IncomingMessage, now: Double) {
        switch message {
        case .text(let text):
            input(.text(text, now: now, wallClock: SystemClock.wall()))
        case .binary(let bytes):
            input(.audio(bytes, now: now))
        }
    }

    /// The connection `id` is gone (lws thread). A started session that may be resumed is
    /// detached and keeps what the connection left behind; any other stops its pipeline.
    func transportClosed(_ id: ConnectionID, backlog: OutboundBacklog?) -> Departure {
        mutate { s in
            guard s.connection == id else { return .detached }  // an old connection, already replaced
            s.connection = nil
            s.backlog = backlog
            perform(s.machine.handle(backlog == nil ? .peerClosed : .connectionLost(now: SystemClock.now())), &s)
            guard s.machine.isClosed else { return .detached }
            let (line, seconds) = summary(s)
            return .closed(line: line, seconds: seconds)
        }
    }

    /// Continues this session on `connection`, for a client that sent `resume`: returns why
    /// not, or nil when done (`resumed` is on its way). If the session still has a connection
    /// (the client noticed the drop before the server did), that one is dropped now.
    func attach(_ connection: ConnectionID, token: String, after: UInt64) -> String? {
        mutate { s -> String? in
            guard !s.machine.isClosed else { return "session \(sessionID) has ended" }
            guard !s.machine.resumeForfeited else {
                return "session \(sessionID) made more events while away than are kept for it; it is ending"
            }
            guard s.machine.acceptsResume(token: token) else { return "the resume token is not this session's" }
            if let old = s.connection {
                s.backlog = server.handle.detach(old)
                s.connection = nil
                perform(s.machine.handle(.connectionLost(now: SystemClock.now())), &s)
            }
            guard s.machine.isDetached, let backlog = s.backlog else { return "session \(sessionID) cannot be resumed" }
            guard server.handle.adopt(connection, backlog, after: after, retaining: server.resumeRetainedBytes) else {
                return "the events after seq \(after) are no longer kept (the last one sent was \(backlog.lastOrdinal))"
            }
            for message in s.held.drained() { server.handle.send(connection, message) }
            s.connection = connection
            s.backlog = nil
            perform(s.machine.handle(.attached(now: SystemClock.now())), &s)
            return nil
        }
    }

    /// This connection's client asked to resume another session.
    private func resume(_ request: ResumeRequest) {
        guard let connection = state.withLock({ $0.connection }) else { return }
        let why: String
        if let target = server.sessions.session(id: request.session), target !== self {
            if let refusal = target.attach(connection, token: request.resumeToken, after: request.after) {
                why = refusal
            } else {
                server.sessions.replace(self, by: target, on: connection)
                lane.close(.cancel)
                server.log.info("session \(request.session) resumed on \(connection) from \(remoteAddress)")
                return
            }
        } else {
            why = "no session \"\(clippedForError(request.session))\" is waiting to be resumed (it ended, or it was not resumed in time)"
        }
        input(.resumeRejected(why))
    }

    /// Seconds of audio waiting for analysis (for /metrics).
    var bufferedSeconds: Double { state.withLock { $0.machine.backlogSeconds } }

    /// Whether the protocol has closed (ended, cancelled, failed, or the peer left).
    var isClosed: Bool { state.withLock { $0.machine.isClosed } }

    /// The connection now carrying the session, if any.
    var connection: ConnectionID? { state.withLock { $0.connection } }

    /// Wall-clock seconds its lane's compute jobs have taken: its demand, for admission.
    var laneBusySeconds: Double { lane.work.busy }

    /// Takes the session out of the registry's live count; true the first time only.
    func leaveLiveCount() -> Bool {
        countedLive.exchange(false, ordering: .acquiringAndReleasing)
    }

    // MARK: -

    /// One line on how the session went, and how long it lasted (wall clock).
    func summary(_ s: State) -> (line: String, seconds: Double) {
        let m = s.machine
        let seconds = SystemClock.now() - s.openedAt
        var line = "session \(sessionID) closed"
        if let close = m.phase.close {
            line += " (\(close.code) \(close.reason))"
        } else {
            line += " by the client"
        }
        line += ": \(JSONWriter.secondsText(m.receivedSeconds)) s of audio in \(JSONWriter.secondsText(seconds)) s, "
        line += "analyzed \(JSONWriter.secondsText(m.analyzedSeconds)) s, \(m.finals.count) finals, "
        line += "max lag \(JSONWriter.secondsText(s.maxLag)) s"
        return (line, seconds)
    }

    /// A random id of `length` lowercase letters and digits (12: a session id; 24, ≈124 bits:
    /// a resume token).
    private static func makeID(length: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        return String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }
}
