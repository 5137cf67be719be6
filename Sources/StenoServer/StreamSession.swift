import StenoAudio
import StenoCore
import StenoSession
import StenoSpeech
import StenoTransport
import StenoWorkers
import Synchronization

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
    let connection: ConnectionID
    let sessionID: String
    let remoteAddress: String
    private let server: ServerContext
    private let lane: Lane
    /// The pipeline, touched only by the lane's jobs.
    private let pipeline: LaneLocal<TranscriptionPipeline?>
    private let state: Mutex<State>

    private struct State: Sendable {
        var machine: SessionMachine
        var budget: InboundBudget
        /// Monotonic time the client's `end` was submitted (for the end-to-`ended` latency).
        var endSubmittedAt: Double?
        var openedAt: Double
        var closeCode: UInt16?
        var closeReason = ""
        var lastReportedAnalyzed = 0.0
        var maxLag = 0.0
        var channel: String?
        var transportClosed = false
    }

    init(connection: ConnectionID, remoteAddress: String, server: ServerContext, now: Double) {
        self.connection = connection
        self.remoteAddress = remoteAddress
        self.server = server
        self.sessionID = Self.makeID()
        self.lane = server.pool.makeLane(label: "session \(sessionID)")
        self.pipeline = LaneLocal(nil, lane: lane)
        let machine = SessionMachine(id: sessionID, configuration: server.sessionConfiguration, now: now)
        self.state = Mutex(State(
            machine: machine,
            budget: InboundBudget(highWaterSeconds: max(0.1, server.sessionConfiguration.limits.bufferSeconds)),
            openedAt: now))
    }

    // MARK: Inputs

    /// Runs the machine on `inputs`, in order, and carries out the actions.
    func input(_ inputs: SessionInput...) {
        state.withLock { s in
            for input in inputs {
                perform(s.machine.handle(input), &s)
            }
        }
    }

    /// A message from the client (lws thread).
    func received(_ message: IncomingMessage, now: Double) {
        switch message {
        case .text(let text):
            input(.text(text, now: now, wallClock: SessionClock.wall()))
        case .binary(let bytes):
            input(.audio(bytes, now: now))
        }
    }

    /// The connection is gone (lws thread). Stops the pipeline and gives the recognizer back.
    /// Returns the summary for the log, once.
    func transportClosed() -> String? {
        let line = state.withLock { s -> String? in
            guard !s.transportClosed else { return nil }
            s.transportClosed = true
            perform(s.machine.handle(.peerClosed), &s)
            if let channel = s.channel { server.channels.release(channel, session: sessionID) }
            return summary(s)
        }
        releasePipeline()
        return line
    }

    /// Seconds of audio waiting for analysis (for /metrics).
    var bufferedSeconds: Double { state.withLock { $0.budget.pending } }

    /// Whether the protocol has closed (ended, cancelled, failed, or the peer left).
    var isClosed: Bool { state.withLock { $0.machine.isClosed } }

    /// Progress for the lag metric: received − analyzed.
    var lag: Double { state.withLock { $0.machine.backlogSeconds } }

    // MARK: Actions

    private func perform(_ actions: [SessionAction], _ s: inout State) {
        var queue = actions[...]
        while let action = queue.popFirst() {
            switch action {
            case .send(let event):
                queue.append(contentsOf: send(event, &s))
            case .startPipeline(let request):
                startPipeline(request)
                if let channel = request.channel {
                    if server.channels.claim(channel, session: sessionID, startedAt: s.machine.startedAt ?? SessionClock.wall(),
                                             includeWords: request.words) {
                        s.channel = channel
                    } else {
                        queue.append(contentsOf: s.machine.handle(.pipelineWarning(StenoError(.badMessage,
                            "channel \"\(channel)\" already has a publisher; this session is not published"))))
                    }
                }
                server.log.info("session \(sessionID) \(connection) started: \(request.audio) from \(remoteAddress)"
                    + (request.channel.map { " on channel \($0)" } ?? ""))
            case .submitAudio(let chunk):
                server.metrics.audioReceivedSeconds.add(chunk.duration)
                if s.budget.received(chunk.duration) == .pause {
                    server.handle.setReading(connection, false)
                }
                submitAudio(chunk)
            case .submitFinalize(let through):
                submit { pipeline throws(StenoError) in
                    let events = try pipeline.finalize(through: through)
                    return ([.results(events, analyzedThrough: pipeline.analyzedSeconds, now: SessionClock.now()),
                             .finalizeCompleted], 0)
                }
            case .submitEnd:
                s.endSubmittedAt = SessionClock.now()
                submit { pipeline throws(StenoError) in
                    let events = try pipeline.finish()
                    return ([.results(events, analyzedThrough: pipeline.receivedSeconds, now: SessionClock.now()),
                             .endCompleted], 0)
                }
            case .cancelPipeline:
                if s.budget.reset() == .resume { server.handle.setReading(connection, true) }
                releasePipeline()
            case .close(let code, let reason):
                s.closeCode = code
                s.closeReason = reason
                // Nothing more is published: the channel is free for the next publisher now,
                // not when this connection has finished closing.
                if let channel = s.channel {
                    server.channels.release(channel, session: sessionID)
                    s.channel = nil
                }
                server.handle.close(connection, code: code, reason: reason, discardQueued: code == 4008)
            }
        }
    }

    /// Queues one event; returns what the machine says to do if the client is not reading.
    private func send(_ event: EncodedEvent, _ s: inout State) -> [SessionAction] {
        server.metrics.eventSent(event.kind.rawValue)
        if let code = event.errorCode { server.metrics.errorSent(code) }
        switch event.kind {
        case .ended:
            if let at = s.endSubmittedAt { server.metrics.endLatencySeconds.observe(SessionClock.now() - at) }
        default:
            break
        }
        let message = OutgoingMessage(kind: .text, bytes: event.bytes, delivery: event.delivery, sequenced: true)
        if let channel = s.channel, event.kind.isBroadcast {
            server.channels.publish(event, final: event.kind == .final ? s.machine.finals.last : nil,
                                    volatile: s.machine.showingVolatile, on: channel, from: sessionID)
        }
        if server.handle.send(connection, message) == .overflow {
            return s.machine.handle(.outboundOverflow)
        }
        return []
    }

    // MARK: Pipeline jobs (run on the lane)

    private func startPipeline(_ request: StartRequest) {
        let engine = server.engine
        let metrics = server.metrics
        lane.submit(kind: .preparation) { [self] in
            do throws(StenoError) {
                let recognizer = try engine.makeRecognizer(options: RecognizerOptions())
                let made = try TranscriptionPipeline(format: request.audio, recognizer: recognizer)
                metrics.recognizersCreated.increment()
                if request.audio.encoding == .opus { metrics.decodersCreated.increment() }
                pipeline.withValue { $0 = made }
            } catch {
                server.log.error("session \(sessionID): cannot start the recognizer: \(error.message)")
                input(.pipelineFailed("the recognizer could not be started: \(error.message)"))
            }
        }
    }

    private func submitAudio(_ chunk: AudioChunk) {
        submit { pipeline throws(StenoError) in
            let output = try pipeline.append(chunk.bytes)
            var inputs: [SessionInput] = [.results(output.events, analyzedThrough: pipeline.analyzedSeconds, now: SessionClock.now())]
            if let warning = output.warning, !chunk.headerIsMalformed {
                inputs.append(.pipelineWarning(warning))
            }
            return (inputs, chunk.duration)
        }
    }

    /// Queues a pipeline job. `body` returns the inputs to feed back and the seconds of
    /// audio it consumed from the inbound budget. A thrown error fails the session with
    /// `internal`; a missing pipeline (it failed to start, or was cancelled) does nothing.
    private func submit(_ body: @escaping @Sendable (TranscriptionPipeline) throws(StenoError) -> ([SessionInput], Double)) {
        lane.submit { [self] in
            let outcome: Result<([SessionInput], Double), StenoError>? = pipeline.withValue { value in
                guard let p = value else { return nil }
                do throws(StenoError) {
                    return .success(try body(p))
                } catch {
                    p.cancel()
                    value = nil
                    return .failure(error)
                }
            }
            switch outcome {
            case .success(let (inputs, consumed))?:
                feedBack(inputs, consumed: consumed)
            case .failure(let error)?:
                server.log.error("session \(sessionID): pipeline failed: \(error.message)")
                input(.pipelineFailed(error.message))
            case nil:
                break
            }
        }
    }

    /// Results from the lane: into the machine, and audio out of the inbound budget.
    private func feedBack(_ inputs: [SessionInput], consumed: Double) {
        state.withLock { s in
            for input in inputs { perform(s.machine.handle(input), &s) }
            let analyzed = s.machine.analyzedSeconds
            if analyzed > s.lastReportedAnalyzed {
                server.metrics.audioAnalyzedSeconds.add(analyzed - s.lastReportedAnalyzed)
                s.lastReportedAnalyzed = analyzed
            }
            s.maxLag = max(s.maxLag, s.machine.backlogSeconds)
            if consumed > 0, s.budget.analyzed(consumed) == .resume {
                server.handle.setReading(connection, true)
            }
        }
    }

    /// Drops queued work and gives the recognizer back (after a running job finishes).
    private func releasePipeline() {
        lane.close(.cancel) { [pipeline] in
            pipeline.withValue { value in
                value?.cancel()
                value = nil
            }
        }
    }

    // MARK: -

    private func summary(_ s: State) -> String {
        let m = s.machine
        let seconds = SessionClock.now() - s.openedAt
        server.metrics.sessionDurationSeconds.observe(seconds)
        var line = "session \(sessionID) \(connection) closed"
        if let code = s.closeCode {
            line += " (\(code) \(s.closeReason))"
        } else {
            line += " by the client"
        }
        line += ": \(JSONWriter.secondsText(m.receivedSeconds)) s of audio in \(JSONWriter.secondsText(seconds)) s, "
        line += "analyzed \(JSONWriter.secondsText(m.analyzedSeconds)) s, \(m.finals.count) finals, max lag \(JSONWriter.secondsText(s.maxLag)) s"
        return line
    }

    private static func makeID() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        return String((0..<12).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }
}
