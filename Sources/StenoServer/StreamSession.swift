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
    private let server: ServerContext
    private let lane: Lane
    /// The pipeline and what its jobs owe the machine, touched only by the lane's jobs.
    private let work: LaneLocal<LaneWork>

    private struct LaneWork {
        var pipeline: TranscriptionPipeline?
        /// The completions (`finalizeCompleted`, `endCompleted`) of requests whose finals have
        /// not come yet: the recognizer waits for a shared decoder.
        var owed: [SessionInput] = []
    }
    private let state: Locked<State>
    /// Whether the registry counts this session as live (see `SessionRegistry.liveCount`);
    /// cleared once, when its protocol closes or it leaves the registry.
    private let countedLive = Atomic<Bool>(true)

    private struct State: Sendable {
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
    private func input(_ inputs: [SessionInput], nextBlock: Double? = nil) {
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

    /// What the router's tick found at a session (`visit`).
    struct Visit {
        /// The lag (received − analyzed) of a talker: a session that audio came to since the
        /// last visit or that has more than a block waiting; nil for a quiet one.
        var lag: Double?
        /// Whether it streams at about real time (not a file sent faster): no more audio
        /// received than wall-clock time since `start`, give or take a second.
        var live = false
        /// How it went, once it has closed with no connection (the log line): it is forgotten.
        var closing: (line: String, seconds: Double)?
    }

    /// The router's tick, when this session is due (`SessionRegistry.takeDue`): the machine's
    /// clock (deadlines, progress), the audio batch and the stall (`tickAudio`), and what the
    /// tick samples; then the session says when it wants the next one.
    func visit(now: Double) -> Visit {
        mutate { s in
            // `takeDue` took its entry out: the registry is told again below, whatever the time.
            s.scheduledAt = nil
            let talking = s.heardSinceVisit || Self.isBehind(s.machine)
            s.heardSinceVisit = false
            perform(s.machine.handle(.tick(now: now)), &s)
            tickAudio(now: now, &s)
            var visit = Visit()
            let m = s.machine
            if talking, let started = m.startedMonotonic {
                visit.lag = m.backlogSeconds
                visit.live = m.receivedSeconds <= (now - started) * 1.1 + 1
            }
            if m.isClosed && s.connection == nil { visit.closing = summary(s) }
            return visit
        }
    }

    /// More than a block waits for analysis: the session is behind (or its recognizer waits for
    /// a decoder) and is ticked until it catches up. A remainder short of a block waits for
    /// more audio, which may never come: that alone is not behind.
    private static func isBehind(_ m: SessionMachine) -> Bool { m.backlogSeconds > batchSeconds + 0.01 }

    /// Runs `body` under the session's lock, then tells the registry when the session next
    /// needs a tick: every change that can move a deadline, start or stop a talker, or leave
    /// a batch comes through here.
    private func mutate<R>(_ body: (inout State) -> R) -> R {
        state.withLock { s in
            let result = body(&s)
            let due = wakeAt(s)
            if due != s.scheduledAt {
                server.sessions.schedule(self, at: due)
                s.scheduledAt = due
            }
            return result
        }
    }

    /// When the tick next has something to do here: at once (`-infinity`, the next tick) for a
    /// talker or a closed session with no connection left to say so; otherwise the earliest
    /// of the machine's next deadline or progress, the short batch's linger and the stall
    /// release; `infinity` when only an input can change that (a closed session whose
    /// connection is closing, a started one with no timer).
    private func wakeAt(_ s: State) -> Double {
        let m = s.machine
        if m.isClosed { return s.connection == nil ? -.infinity : .infinity }
        if s.heardSinceVisit || Self.isBehind(m) { return -.infinity }
        var due = m.nextTickDue
        if !s.batch.isEmpty { due = min(due, s.batchSince + Self.batchLinger) }
        if let stallAt = stallDue(s) { due = min(due, stallAt) }
        return due
    }

    /// Takes the session out of the registry's live count; true the first time only.
    func leaveLiveCount() -> Bool {
        countedLive.exchange(false, ordering: .acquiringAndReleasing)
    }

    // MARK: Actions

    /// Carries out `actions`, and tells the registry once the protocol has closed.
    private func perform(_ actions: [SessionAction], _ s: inout State) {
        carryOut(actions, &s)
        if s.machine.isClosed && leaveLiveCount() { server.sessions.closed(self) }
    }

    private func carryOut(_ actions: [SessionAction], _ s: inout State) {
        var queue = actions[...]
        while let action = queue.popFirst() {
            switch action {
            case .send(let event):
                queue.append(contentsOf: send(event, &s))
            case .startPipeline(let request):
                startPipeline(request)
                if let channel = request.channel {
                    if server.channels.claim(channel, session: sessionID, startedAt: s.machine.startedAt ?? SystemClock.wall(),
                                             includeWords: request.words) {
                        s.channel = channel
                    } else {
                        queue.append(contentsOf: s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                            "channel \"\(channel)\" already has a publisher; this session is not published"))))
                    }
                }
                server.log.info("session \(sessionID) \(s.connection.map(String.init(describing:)) ?? "") started: \(request.audio) from \(remoteAddress)"
                    + (request.channel.map { " on channel \($0)" } ?? ""))
            case .submitAudio(let chunk):
                server.metrics.audioReceivedSeconds.add(chunk.duration)
                s.quietSince = SystemClock.now()
                s.stallReleased = false
                s.heardSinceVisit = true
                if s.batch.isEmpty { s.batchSince = s.quietSince }
                s.batch.append(chunk)
                s.batchSeconds += chunk.duration
                if s.batchSeconds >= Self.batchSeconds || !Self.batchesAudio || blockIsIn(s, through: chunk.start + chunk.duration) {
                    submitBatch(&s)
                }
            case .pauseReading:
                if let connection = s.connection { server.handle.setReading(connection, false) }
            case .resumeReading:
                if let connection = s.connection { server.handle.setReading(connection, true) }
            case .submitGap(_, let duration):
                s.quietSince = SystemClock.now()
                s.stallReleased = false
                s.heardSinceVisit = true
                submitBatch(&s)
                submit { pipeline throws(StenoError) in
                    (try pipeline.gap(seconds: duration), [])
                }
            case .resume(let request):
                s.resumeRequest = request
            case .submitFinalize(let through):
                submitBatch(&s)
                submit { pipeline throws(StenoError) in
                    (try pipeline.finalize(through: through), [.finalizeCompleted])
                }
            case .submitEnd:
                submitBatch(&s)
                s.endSubmittedAt = SystemClock.now()
                submit(timed: .end) { pipeline throws(StenoError) in
                    (try pipeline.finish(), [.endCompleted])
                }
            case .cancelPipeline:
                s.batch.removeAll()
                s.batchSeconds = 0
                releasePipeline()
            case .close(let code, let reason):
                if let connection = s.connection {
                    server.handle.close(connection, code: code, reason: reason, discardQueued: code == 4008)
                }
            }
        }
        // Once the protocol has closed nothing more is published: the channel is free for the
        // next publisher now, not when this connection has finished closing.
        if s.machine.isClosed { releaseChannel(&s) }
        // And the pipeline goes now, on the lane: its recognizer's deinit takes the lock that
        // guards pocketsphinx's shared configuration, which a decoder being made holds for a
        // second or more; the session's last reference may be dropped on the lws thread.
        if s.machine.isClosed && !s.pipelineRetired {
            s.pipelineRetired = true
            lane.close(.drain) { [work] in
                work.withValue { $0.pipeline = nil }
            }
        }
    }

    /// Frees the session's channel for the next publisher (once its last event is published).
    private func releaseChannel(_ s: inout State) {
        guard let channel = s.channel else { return }
        server.channels.release(channel, session: sessionID, state: .after(s.machine.phase),
                                duration: s.machine.receivedSeconds, now: SystemClock.wall())
        s.channel = nil
    }

    /// Another instance's publisher holds `channel` (the cluster's lease, `ChannelRelay`): this
    /// session is not published after all, and is told so as a second publisher on one
    /// instance is.
    func channelTakenElsewhere(_ channel: String) {
        mutate { s in
            guard s.channel == channel, !s.machine.isClosed else { return }
            s.channel = nil
            perform(s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                "channel \"\(channel)\" already has a publisher on another instance; this session is not published"))), &s)
        }
    }

    /// Queues one event; returns what the machine says to do if the client is not reading.
    private func send(_ event: EncodedEvent, _ s: inout State) -> [SessionAction] {
        server.metrics.eventSent(event.kind.rawValue)
        if let code = event.errorCode { server.metrics.errorSent(code) }
        switch event.kind {
        case .ended:
            if let at = s.endSubmittedAt { server.metrics.endLatencySeconds.observe(SystemClock.now() - at) }
        default:
            break
        }
        let message = OutgoingMessage(event)
        if let channel = s.channel, event.kind.isBroadcast {
            server.channels.publish(event, final: event.kind == .final ? s.machine.finals.last : nil,
                                    volatile: s.machine.showingVolatile, on: channel, from: sessionID)
        }
        // A closed session's channel is free before the client can read that it is over (its
        // finals are published by then): a client that starts the next publisher on `ended`
        // must find the channel free.
        // Likewise its place among the live sessions: a client that reads `ended` and connects
        // again must not be refused as if this session still counted.
        if s.machine.isClosed && (event.kind == .ended || event.kind == .cancelled || event.kind == .error) {
            releaseChannel(&s)
            if leaveLiveCount() { server.sessions.closed(self) }
        }
        var result = s.connection.map { server.handle.send($0, message) } ?? .closed
        if result == .closed && !s.machine.isClosed && !s.machine.resumeForfeited {
            // No connection, or it just went (its `closed` is on its way): held for the client
            // that resumes. Bounded like a connection's queue; beyond it the session cannot be
            // resumed and ends, its events going only to its channel (`outboundOverflow`).
            result = s.held.enqueue(message, size: message.byteCount, delivery: message.delivery) == .overflow
                ? .overflow : .queued
        }
        if result == .overflow {
            let detached = s.machine.isDetached
            let actions = s.machine.handle(.outboundOverflow)
            if detached && s.machine.resumeForfeited {
                // Nobody will have them now.
                _ = s.held.drained()
                server.log.info("session \(sessionID): more events made while its client was away than are kept "
                                + "for it (\(server.sessionConfiguration.limits.outboundBytes) bytes); it cannot be resumed and is ending")
            }
            return actions
        }
        return []
    }

    // MARK: Pipeline jobs (run on the lane)

    private func startPipeline(_ request: StartRequest) {
        let engine = server.engine
        let dedicated = server.dedicatedRecognizers
        let metrics = server.metrics
        lane.submit { [self] in
            do throws(StenoError) {
                // Light: a front end of its own; a decoder is borrowed per utterance, and when
                // none is free the recognizer waits and `wake` brings the lane back.
                let options = RecognizerOptions(keepsDecoder: dedicated, vocabulary: request.vocabulary,
                                                alternatives: request.alternatives, model: request.model)
                let recognizer = try engine.makeRecognizer(options: options) { [weak self] in
                    self?.wake()
                }
                // How the phrases were taken (words left out) is the client's to know.
                for notice in recognizer.notices { input(.pipelineWarning(notice)) }
                let made = try TranscriptionPipeline(format: request.audio, recognizer: recognizer)
                metrics.recognizersCreated.increment()
                if request.audio.encoding == .opus { metrics.decodersCreated.increment() }
                work.withValue { $0.pipeline = made }
            } catch {
                server.log.error("session \(sessionID): cannot start the recognizer: \(error.message)")
                input(.pipelineFailed("the recognizer could not be started: \(error.message)"))
            }
        }
    }

    /// Whether the audio received through `time` completes the recognizer's next block.
    private func blockIsIn(_ s: State, through time: Double) -> Bool {
        // Half a sample of slack at 16 kHz: chunk times are sums of durations.
        guard let at = s.flushAt else { return false }
        return time >= at - 0.00003
    }

    /// Hands the audio batch to the lane, as one job.
    private func submitBatch(_ s: inout State) {
        guard !s.batch.isEmpty else { return }
        let chunks = s.batch
        s.batch.removeAll(keepingCapacity: true)
        s.batchSeconds = 0
        s.flushAt = nil
        submit(timed: .batch) { pipeline throws(StenoError) in
            var events: [TranscriberEvent] = []
            var warnings: [SessionInput] = []
            for chunk in chunks {
                let output = try pipeline.append(chunk.bytes)
                events += output.events
                if let warning = output.warning, !chunk.headerIsMalformed { warnings.append(.pipelineWarning(warning)) }
            }
            return (events, warnings)
        }
    }

    /// At the session's tick (`visit`). A short batch that has waited `batchLinger` goes to the
    /// lane (the client paused, or sends little).
    ///
    /// And a session whose audio stopped in the middle of speech (its connection dropped, the
    /// client stalled) would hold a shared decoder until audio came again, perhaps never:
    /// after `limits.stallSeconds` without audio, with everything received analyzed, what was
    /// heard is finalized and the decoder goes back to the pool. Audio that comes later starts
    /// a new utterance.
    private func tickAudio(now: Double, _ s: inout State) {
        // Compared as `wakeAt` computes the due times, so a tick at one acts whatever the rounding.
        if !s.batch.isEmpty && now >= s.batchSince + Self.batchLinger { submitBatch(&s) }
        guard let stallAt = stallDue(s), s.batch.isEmpty, now >= stallAt, !Self.isBehind(s.machine) else { return }
        s.stallReleased = true
        let silent = JSONWriter.secondsText(now - s.quietSince)
        submit { [self] pipeline throws(StenoError) in
            let events = try pipeline.finalize()
            if events.contains(where: { if case .final = $0 { true } else { false } }) {
                server.metrics.stalledUtterances.increment()
                server.log.debug("session \(sessionID): no audio for \(silent) s in the middle of speech; what was heard is final, its recognizer given back")
            }
            return (events, [])
        }
    }

    /// When the utterance in progress counts as stalled (`tickAudio`), if it can: speech is going
    /// on and the client has sent nothing for `limits.stallSeconds`. Not while the session is
    /// ending (it is finishing its utterance already), nor while a `finalize` is outstanding:
    /// its client may wait for `finalized` before it sends more, and the finalize waits for the
    /// pipeline (a re-recognition after a cut can wait for a decoder). A finalize of the stall's
    /// own, there, would end the utterance the cut began where the client never asked; so the
    /// clock starts again when the client is told `finalized`.
    private func stallDue(_ s: State) -> Double? {
        let stall = server.sessionConfiguration.limits.stallSeconds
        guard stall > 0, s.speaking, !s.stallReleased, s.machine.phase == .streaming else { return nil }
        return s.quietSince + stall
    }

    /// The recognizer can go on (a decoder was granted to it): its lane, parked while it
    /// waited, goes on with what it kept.
    private func wake() {
        lane.unpark { [self] in
            run { pipeline throws(StenoError) in (try pipeline.proceed(), []) }
        }
    }

    /// Queues a pipeline job (see `run`). `timed`: what it is, for the latency log.
    private func submit(timed: TimedJob? = nil,
                        _ body: @escaping @Sendable (TranscriptionPipeline) throws(StenoError) -> ([TranscriberEvent], [SessionInput])) {
        let submitted = timed == nil ? 0 : SystemClock.now()
        lane.submit { [self] in run(body, timed: timed.map { ($0, submitted) }) }
    }

    /// Jobs whose finals the latency log follows (`steno-bench latency` reads it).
    private enum TimedJob: String { case batch, end }

    /// Runs a pipeline step on the lane: `body` returns the recognizer events it made and the
    /// inputs to pass on (warnings), or that say its request is done (completions). The
    /// events go to the machine with how far analysis has got. While the recognizer waits for
    /// a decoder, completions are owed (a request is done only when its finals have come)
    /// and the lane parks until `wake`. A thrown error fails the session with `internal`; a
    /// missing pipeline (it failed to start, or was cancelled) does nothing.
    private func run(_ body: (TranscriptionPipeline) throws(StenoError) -> ([TranscriberEvent], [SessionInput]),
                     timed: (job: TimedJob, submitted: Double)? = nil) {
        let started = timed == nil ? 0 : SystemClock.now()
        var timing: (events: [TranscriberEvent], utterance: UtteranceTiming?)?
        var nextBlock: Double?
        let outcome: Result<([SessionInput], Bool), StenoError>? = work.withValue { w in
            guard let p = w.pipeline else { return nil }
            do throws(StenoError) {
                let (events, extra) = try body(p)
                if timed != nil && server.log.isEnabled(.debug) { timing = (events, p.lastUtteranceTiming) }
                nextBlock = p.secondsToNextBlock.map { p.receivedSeconds + $0 }
                var inputs: [SessionInput] = []
                var completions: [SessionInput] = []
                for input in extra {
                    switch input {
                    case .finalizeCompleted, .endCompleted: completions.append(input)
                    default: inputs.append(input)
                    }
                }
                let waiting = p.isWaiting
                // After `finish`, everything received was analyzed: say so exactly.
                let through = p.isFinished && !waiting ? p.receivedSeconds : p.analyzedSeconds
                inputs.insert(.results(events, analyzedThrough: through, now: SystemClock.now()), at: 0)
                w.owed += completions
                if !waiting {
                    inputs += w.owed
                    w.owed.removeAll()
                }
                return .success((inputs, waiting))
            } catch {
                p.cancel()
                w.pipeline = nil
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let (inputs, waiting))?:
            input(inputs, nextBlock: waiting ? nil : nextBlock)
            if let timed, let timing { logLatency(timed.job, submitted: timed.submitted, started: started, timing) }
            if waiting { lane.park() }
        case .failure(let error)?:
            server.log.error("session \(sessionID): pipeline failed: \(error.message)")
            input(.pipelineFailed(error.message))
        case nil:
            break
        }
    }

    /// One debug line per final of a timed job (and one per `end`), with where its utterance's
    /// end was seen and when each step happened (monotonic seconds), so that a final's latency
    /// can be cut into its parts: the silence the detector waited for, the rest of its block,
    /// the batch, the lane, the engine's end of utterance, the machine and the connection.
    private func logLatency(_ job: TimedJob, submitted: Double, started: Double,
                            _ timing: (events: [TranscriberEvent], utterance: UtteranceTiming?)) {
        let queued = SystemClock.now()
        func field(_ value: Double?) -> String { value.map { "\($0)" } ?? "-" }
        let finals = timing.events.compactMap { if case .final(let result) = $0 { result } else { nil } }
        guard !finals.isEmpty || job == .end else { return }
        let u = timing.utterance
        var line = "latency session=\(sessionID) job=\(job.rawValue) submitted=\(field(submitted)) started=\(field(started))"
        if let final = finals.last, let u {
            line += " final_end=\(field(final.range.end)) decided=\(field(u.detectorDecidedAt)) closed=\(field(u.closedAt))"
            line += " close=\(field(u.closeBegan)) search=\(field(u.endSearchSeconds)) words=\(field(u.wordsSeconds))"
            line += " alternatives=\(field(u.alternativesSeconds)) cpu=\(field(u.cpuSeconds))"
        }
        line += " queued=\(field(queued))"
        server.log.debug(line)
    }

    /// Drops queued work and gives the recognizer back (after a running job finishes).
    private func releasePipeline() {
        lane.close(.cancel) { [work] in
            work.withValue { w in
                w.pipeline?.cancel()
                w.pipeline = nil
            }
        }
    }

    // MARK: -

    /// One line on how the session went, and how long it lasted (wall clock).
    private func summary(_ s: State) -> (line: String, seconds: Double) {
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
