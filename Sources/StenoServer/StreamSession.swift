// One `/v1/stream` connection's session: the server's host of the session driver (StenoSession's
// `SessionDriver`). What is the server's is here: the connection the events go to, what a
// dropped connection leaves for a resume, the session's channel, its metrics and log; how it is
// made, the client's messages, a dropped connection and a resume. How its events are delivered
// and its channel claimed and freed is in StreamSession+Actions.swift, the router's tick and
// the registry's schedule in StreamSession+Ticks.swift.

import StenoCore
import StenoSession
import StenoSystem
import StenoTransport
import StenoWorkers

/// One `/v1/stream` connection: the session driver, its pipeline's jobs on a worker `Lane`.
///
/// - The lws service thread feeds it what the client sends (text, audio, too-large frames,
///   the connection closing) and the periodic tick.
/// - The session's lane runs the pipeline (decoding and recognition, strictly in order) and
///   feeds back what it produced.
///
/// Both go through the driver's `input`, which runs the machine and carries out its actions
/// under the session's lock, so events reach the connection's outbound queue in `seq` order and
/// audio reaches the lane in arrival order, whichever thread produced them. Nothing done under
/// the lock blocks: queueing an event, a job or a flow-control command each takes another short
/// lock and returns. Lock order: session → transport, session → pool; never the other way.
final class StreamSession: SessionDriver {
    let sessionID: String
    /// The digest of the session's resume token, kept with its channel's lease in the cluster
    /// (`ChannelRelay.takeOver`); nil when sessions cannot be resumed.
    let channelProof: String?
    let remoteAddress: String
    let server: ServerContext
    let lane: Lane
    let core: SessionCore<Link>

    /// What the server keeps of a session under its lock, beside the machine.
    struct Link: Sendable {
        /// The connection the session's events go to; nil while it is detached (its client
        /// may resume it on a new connection).
        var connection: ConnectionID?
        /// What the last connection left unsent or perhaps unreceived, while detached.
        var backlog: OutboundBacklog?
        /// Events made while detached, for the client that resumes.
        var held: OutboundQueue<OutgoingMessage>
        var openedAt: Double
        /// How much of `machine.analyzedSeconds` the process-wide counter has been given.
        var analyzedCounted = 0.0
        var maxLag = 0.0
        /// The channel this session publishes to, until it closes.
        var channel: String?
        /// The channel it asked for while another instance's publisher had it, and whether its
        /// events carry words: it publishes there once that publisher is gone.
        var waitingFor: (channel: String, words: Bool, renditions: Renditions)?
        /// The wire protocol of its connection's route.
        var codec: any SessionCodec
    }

    /// How a session takes the end of its connection.
    enum Departure {
        /// It waits, detached, for its client to resume it.
        case detached
        /// It is over: how it went, for the log and the duration metric.
        case closed(line: String, seconds: Double)
    }

    init(connection: ConnectionID, remoteAddress: String, server: ServerContext, route: SessionRoute = .steno) {
        self.remoteAddress = remoteAddress
        self.server = server
        self.sessionID = Self.makeID(length: 12)
        self.lane = server.pool.makeLane(label: "session \(sessionID)")
        var configuration = server.sessionConfiguration
        configuration.limits = route.limits(configuration.limits)
        let limits = configuration.limits
        let now = server.clock.now()
        let resumeToken = Self.makeID(length: 24)
        // Only a token the client is given (`ready` has one when sessions can be resumed) proves anything.
        channelProof = limits.resumeSeconds > 0 ? SHA256.hex(resumeToken) : nil
        let machine = SessionMachine(id: sessionID, configuration: configuration, now: now,
                                     resumeToken: resumeToken)
        let link = Link(connection: connection, held: OutboundQueue(byteLimit: limits.outboundBytes), openedAt: now,
                        codec: route.codec)
        self.core = SessionCore(machine: machine, local: link, engine: server.engine, executor: lane,
                                clock: server.clock, options: server.driver)
        if limits.resumeSeconds > 0 {
            // What the client may not have received when its connection drops is sent again
            // after it resumes: keep what was written recently (in flight is at most a socket's
            // buffers' worth).
            server.handle.retainWritten(connection, bytes: server.resumeRetainedBytes)
        }
    }

    // MARK: Inputs

    /// A message from the client (lws thread).
    func received(_ message: IncomingMessage) {
        take(mutate { $0.local.codec.decode(message) })
    }

    /// The connection has opened: what its protocol says and does first.
    func opened() {
        let inputs = mutate { s -> [CodecInput] in
            let (messages, inputs) = s.local.codec.opened()
            perform(send(messages, &s), &s)
            return inputs
        }
        take(inputs)
    }

    private func take(_ inputs: [CodecInput]) {
        for input in inputs {
            switch input {
            case .text(let text): receivedText(text)
            case .audio(let bytes): receivedAudio(bytes)
            case .message(let message): self.input(.message(message, now: core.clock.now(), wallClock: core.clock.wall()))
            case .activity: self.input(.activity(now: core.clock.now()))
            case .warning(let error): self.input(.pipelineWarning(error))
            case .reply(let message): mutate { s in perform(send([message], &s), &s) }
            case .refused(let error): self.input(.refused(error))
            }
        }
    }


    /// The connection `id` is gone (lws thread). A started session that may be resumed is
    /// detached and keeps what the connection left behind; any other stops its pipeline.
    func transportClosed(_ id: ConnectionID, backlog: OutboundBacklog?) -> Departure {
        let now = core.clock.now()
        return mutate { s in
            guard s.local.connection == id else { return .detached }  // an old connection, already replaced
            s.local.connection = nil
            s.local.backlog = backlog
            perform(s.machine.handle(backlog == nil ? .peerClosed : .connectionLost(now: now)), &s)
            guard s.machine.isClosed else { return .detached }
            let (line, seconds) = summary(s)
            return .closed(line: line, seconds: seconds)
        }
    }

    /// Continues this session on `connection`, for a client that sent `resume`: returns why
    /// not, or nil when done (`resumed` is on its way). If the session still has a connection
    /// (the client noticed the drop before the server did), that one is dropped now.
    func attach(_ connection: ConnectionID, token: String, after: UInt64) -> String? {
        let now = core.clock.now()
        return mutate { s -> String? in
            guard !s.machine.isClosed else { return "session \(sessionID) has ended" }
            guard !s.machine.resumeForfeited else {
                return "session \(sessionID) made more events while away than are kept for it; it is ending"
            }
            guard s.machine.acceptsResume(token: token) else { return "the resume token is not this session's" }
            if let old = s.local.connection {
                s.local.backlog = server.handle.detach(old)
                s.local.connection = nil
                perform(s.machine.handle(.connectionLost(now: now)), &s)
            }
            guard s.machine.isDetached, let backlog = s.local.backlog else { return "session \(sessionID) cannot be resumed" }
            guard server.handle.adopt(connection, backlog, after: after, retaining: server.resumeRetainedBytes) else {
                return "the events after seq \(after) are no longer kept (the last one sent was \(backlog.lastOrdinal))"
            }
            for message in s.local.held.drained() { server.handle.send(connection, message) }
            s.local.connection = connection
            s.local.backlog = nil
            perform(s.machine.handle(.attached(now: now)), &s)
            return nil
        }
    }

    /// This connection's client asked to resume another session (the driver, outside the lock).
    func resume(_ request: ResumeRequest) {
        guard let connection = core.read({ $0.local.connection }) else { return }
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
    var bufferedSeconds: Double { core.read { $0.machine.backlogSeconds } }

    /// Whether the protocol has closed (ended, cancelled, failed, or the peer left).
    var isClosed: Bool { core.read { $0.machine.isClosed } }

    /// Whether it still waits for its `start`.
    var isAwaitingStart: Bool { core.read { $0.machine.phase == .awaitingStart } }

    /// The connection now carrying the session, if any.
    var connection: ConnectionID? { core.read { $0.local.connection } }

    /// Wall-clock seconds its lane's compute jobs have taken: its demand, for admission.
    var laneBusySeconds: Double { lane.work.busy }

    // MARK: What the server counts and logs

    func note(_ note: SessionNote) {
        switch note {
        case .audioAccepted(let seconds):
            server.metrics.audioReceivedSeconds.add(seconds)
        case .pipelineMade(let opus):
            server.metrics.recognizersCreated.increment()
            if opus { server.metrics.decodersCreated.increment() }
        case .pipelineFailed(let starting, let message):
            server.log.error("session \(sessionID): " + (starting ? "cannot start the recognizer: " : "pipeline failed: ") + message)
        case .stallFinalized(let silent):
            server.metrics.stalledUtterances.increment()
            server.log.debug("session \(sessionID): no audio for \(JSONWriter.secondsText(silent)) s in the middle of speech; what was heard is final, its recognizer given back")
        case .latency(let line):
            server.log.debug(line)
        }
    }

    var logsLatency: Bool { server.log.isEnabled(.debug) }

    /// Under the lock, after the pipeline's results: what analysis got through, counted; the
    /// channel's live captions (HLS) settled as far as it has got.
    func analyzed(_ s: inout SessionState<Link>) {
        let analyzed = s.machine.analyzedSeconds
        if analyzed > s.local.analyzedCounted {
            server.metrics.audioAnalyzedSeconds.add(analyzed - s.local.analyzedCounted)
            s.local.analyzedCounted = analyzed
        }
        s.local.maxLag = max(s.local.maxLag, s.machine.backlogSeconds)
        if let channel = s.local.channel { server.channels.advance(channel, session: sessionID, floor: s.machine.captionFloor) }
    }

    // MARK: -

    /// One line on how the session went, and how long it lasted (wall clock).
    func summary(_ s: SessionState<Link>) -> (line: String, seconds: Double) {
        let m = s.machine
        let seconds = core.clock.now() - s.local.openedAt
        var line = "session \(sessionID) closed"
        if let close = m.phase.close {
            line += " (\(close.code) \(close.reason))"
        } else {
            line += " by the client"
        }
        line += ": \(JSONWriter.secondsText(m.receivedSeconds)) s of audio in \(JSONWriter.secondsText(seconds)) s, "
        line += "analyzed \(JSONWriter.secondsText(m.analyzedSeconds)) s, \(m.finals.count) finals, "
        line += "max lag \(JSONWriter.secondsText(s.local.maxLag)) s"
        return (line, seconds)
    }

    /// A random id of `length` lowercase letters and digits (12: a session id; 24, ≈124 bits:
    /// a resume token).
    static func makeID(length: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz")
        return String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] })
    }
}
