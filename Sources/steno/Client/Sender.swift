import Foundation
import StenoAudio
import StenoCore
import StenoSystem
import StenoTransport

/// `steno send`: one session's worth of audio to the server, across as many connections as
/// it takes, with its captions printed as they come.
final class Sender {
    private let options: SendOptions
    private let format: AudioFormat
    private let inbox: Inbox
    private let buffer: SharedSendBuffer
    private let capture: Capture
    private let status: StatusLine
    private let log: Log
    private let writer: CaptionWriter
    private let connector: Connector
    private var reconnection: Reconnection

    private enum Phase: Equatable {
        /// No connection; the next attempt at `retryAt`.
        case idle
        case connecting(SessionRecord.Opening)
        /// `start` sent: audio follows at once.
        case starting
        /// `resume` sent: audio waits for `resumed`.
        case resuming
        case streaming
        /// `end` sent on this connection.
        case ending
    }

    private var phase = Phase.idle
    private var connection = ConnectionSlot()
    private var client: WebSocketClient? { connection.client }
    private var retryAt: Double?
    /// The session the audio goes to, and how its timeline maps onto ours.
    private var session: SessionRecord?
    private var timeline: SessionTimeline?
    private var sessionsStarted = 0
    /// Where (our time) the last final printed ends: no final ending earlier is printed again,
    /// and a new session starts after it.
    private var printedThrough: Double?
    private var fatalError: String?
    /// The server answered `start` with an error instead of `ready`.
    private var startRefused = false
    private var inputOver = false
    private var inputError: String?
    private var ended = false
    private var exitCode: Int32?
    private var lastLagReport = 0.0
    private var laggingReported = false
    private var droppedReported = 0.0
    private let reportsLag: Bool

    /// Queued bytes at which sending waits for the socket.
    private static let socketHighWater = 64 * 1024
    /// Fatal errors the server would give again: no point in a new session.
    private static let permanentErrors: Set<String> = ["unsupported_audio", "not_started", "too_large"]

    init(options: SendOptions, input: any AudioInput, encoder: FrameEncoder, log: Log, status: StatusLine, inbox: Inbox) {
        self.options = options
        self.format = encoder.format
        self.inbox = inbox
        self.status = status
        self.log = log
        buffer = SharedSendBuffer(limitSeconds: options.bufferSeconds)
        var isFile = false
        if case .file = options.input { isFile = true }
        let paced = isFile && !options.fast
        capture = Capture(input: input, encoder: encoder, buffer: buffer, inbox: inbox, paced: paced)
        // Lag means something for audio that comes at real time; a fast file is always "behind".
        reportsLag = paced || input.isLive
        writer = CaptionWriter(format: options.client.format) { text in status.around { StandardStreams.stdout(text) } }
        connector = Connector(options: options.client, route: "/v1/stream", inbox: inbox, log: log)
        reconnection = options.client.reconnection
    }

    func run() -> Int32 {
        capture.start()
        connect()
        while exitCode == nil {
            for input in inbox.take(timeout: nextTimeout()) {
                handle(input)
                if exitCode != nil { break }
            }
            if exitCode != nil { break }
            if phase == .idle, let at = retryAt, SystemClock.now() >= at { connect() }
            pump()
            report()
        }
        capture.stop()
        writer.finish()
        status.show("")
        connection.finish()
        return exitCode ?? ExitCode.done
    }

    // MARK: - Connecting

    private func connect() {
        retryAt = nil
        let opening = SessionRecord.opening(for: session, now: SystemClock.now())
        phase = .connecting(opening)
        log.debug("connecting to \(options.client.url("/v1/stream")) (\(opening == .start ? "new session" : "resuming"))")
        var resuming: String? = nil
        if case .resume(let id, _, _) = opening { resuming = id }
        connection.open(connector, resuming: resuming)
    }

    private func opened() {
        guard case .connecting(let opening) = phase, let client else { return }
        switch opening {
        case .start:
            // A new session hears again what the last one did not finalize.
            buffer.withLock { _ = $0.rewind(after: printedThrough ?? -1) }
            let previous = session?.continuation
            session = nil
            timeline = nil
            client.send(.text(options.startText(format, continues: previous)))
            phase = .starting
        case .resume(let id, let token, let seq):
            client.send(.text(ClientMessages.resume(session: id, token: token, after: seq)))
            phase = .resuming
        }
    }

    private func connectionEnded(_ event: WebSocketClientEvent) {
        connection.retire()
        status.show("")
        let hadSession = phase != .idle && { if case .connecting = phase { false } else { true } }()
        let wasResuming = { if case .connecting(.resume) = phase { true } else { false } }()
        phase = .idle
        let now = SystemClock.now()
        if ended {
            exitCode = inputError == nil ? ExitCode.done : ExitCode.inputFailed
            return
        }
        if startRefused {
            exitCode = ExitCode.refused
            return
        }
        if let fatal = fatalError, Self.permanentErrors.contains(fatal) {
            log.error("the server will not take this audio (\(fatal)); stopping")
            exitCode = ExitCode.refused
            return
        }
        fatalError = nil
        session?.lostAt = now
        if wasResuming, case .refused(503, _) = event {
            // A server refuses a resume only while it drains (it admits its own sessions whatever
            // its load), and a balancer answers 503 when the instance that ran the session is
            // gone: either way it will not be resumed. The next session, now, on whoever has room.
            log.warning("the session's server is gone or draining (503); starting a new one")
            session?.resumeToken = nil
            retryAt = now
            return
        }
        if case .closed(let code?, _, _) = event {
            // A close frame means the server ended the session (only a dropped connection
            // leaves it waiting to be resumed), except for a connection it cut for not reading.
            if code != 4008 { session?.resumeToken = nil }
            switch code {
            case 4404:
                // The server no longer has the session (or refused the token): a new one, now.
                log.warning("the session could not be resumed; starting a new one")
                retryAt = now
                return
            case 4009:
                log.info("the session reached the server's time limit; starting a new one")
                retryAt = now
                return
            case 1003, 1009, 4400:
                log.error("the server closed the session (\(code)); stopping")
                exitCode = ExitCode.refused
                return
            default:
                break
            }
        }
        switch reconnection.verdict(for: event, at: now, jitter: Double.random(in: 0...1)) {
        case .retry(let delay, let why):
            let buffered = buffer.withLock { $0.unsentSeconds + $0.sentSeconds }
            log.warning("\(why); \(hadSession ? "reconnecting" : "trying again") in \(Self.seconds(delay)) s"
                        + (buffered > 0.5 ? " (holding \(Self.seconds(buffered)) s of audio)" : ""))
            retryAt = now + delay
        case .stop(let code, let message):
            log.error(message)
            exitCode = code
        }
    }

    // MARK: - Events

    private func handle(_ input: ClientInput) {
        switch input {
        case .socket(let attempt, let event):
            guard attempt == connection.attempt else { return }
            switch event {
            case .opened:
                opened()
            case .message(.text(let text)):
                guard let message = ServerMessage(text) else {
                    log.warning("the server sent something that is not an event: \(text.prefix(80))")
                    return
                }
                received(message)
            case .message(.binary):
                break
            case .closed, .refused, .failed:
                connectionEnded(event)
            }
        case .audio, .bridgeFailed:
            break
        case .inputEnded(let error):
            if let error {
                log.error("the input failed: \(error)")
                inputError = error
            }
            inputOver = true
        case .interrupt(let count):
            if count >= 2 {
                log.warning("interrupted again: quitting now")
                exitCode = ExitCode.interrupted
                return
            }
            log.info("interrupted: ending the session and waiting for its last finals (Ctrl-C again quits at once)")
            capture.stop()
            inputOver = true
        }
    }

    private func received(_ message: ServerMessage) {
        if message.type == "final", isPrinted(message) { return }
        writer.event(message)
        if let seq = message.seq, let last = session?.lastSeq { session?.lastSeq = max(last, seq) }
        switch message.type {
        case "ready":
            guard let record = SessionRecord(ready: message) else { return }
            session = record
            sessionsStarted += 1
            if phase == .starting { phase = .streaming }
            reconnection.succeeded()
            let backlog = buffer.withLock { $0.unsentSeconds }
            log.info((sessionsStarted == 1 ? "session \(record.id) started" : "reconnected: new session \(record.id)")
                     + (backlog > 0.5 ? "; \(Self.seconds(backlog)) s of audio to send" : ""))
            announcedBacklog(backlog)
        case "resumed":
            let received = message.number("received") ?? 0
            timeline?.resumed(received: received)
            let from = timeline?.senderPosition ?? 0
            buffer.withLock { _ = $0.rewind(after: from) }
            if phase == .resuming { phase = .streaming }
            reconnection.succeeded()
            let backlog = buffer.withLock { $0.unsentSeconds }
            log.info("resumed session \(session?.id ?? "?") at \(Self.seconds(received)) s"
                     + (backlog > 0.5 ? "; \(Self.seconds(backlog)) s of audio to send" : ""))
            announcedBacklog(backlog)
        case "final":
            guard let result = message.result else { return }
            let mapped = mapped(result)
            if options.client.format != .jsonl { writer.final(mapped) }
            status.show("")
            printedThrough = mapped.range.end
            buffer.withLock { $0.forget(through: mapped.range.end) }
        case "volatile":
            status.show(message.string("text") ?? "")
        case "progress":
            // What the server has is no longer in flight (SendBuffer: what may be sent).
            if let received = message.number("received"), let timeline {
                buffer.withLock { $0.acknowledge(through: timeline.sender(received)) }
            }
        case "error":
            guard let error = message.error else { return }
            if error.fatal {
                fatalError = error.code
                log.error("the server ended the session: \(error.code): \(error.message)")
            } else if phase == .starting {
                // Before `ready`, an error is the start refused (a model or language the server
                // does not have, phrases past their bounds): no session began, and the same start
                // would be refused again.
                log.error("the server did not start the session: \(error.code): \(error.message)")
                startRefused = true
                phase = .ending
                client?.close(code: 1000)
            } else {
                log.warning("the server says: \(error.code): \(error.message)")
            }
        case "ended":
            ended = true
            writer.finish()
            status.show("")
            log.info("session \(session?.id ?? "") ended: \(Self.seconds(message.number("duration") ?? 0)) s of audio")
        default:
            break
        }
    }

    /// A final already printed (on an earlier connection).
    private func isPrinted(_ message: ServerMessage) -> Bool {
        guard let result = message.result, let through = printedThrough else { return false }
        return mapped(result).range.end <= through + SendBuffer.tolerance
    }

    /// A result on our timeline (a new session's 0 is where its first audio started here).
    private func mapped(_ result: RecognitionResult) -> RecognitionResult {
        guard let timeline else { return result }
        let shift = timeline.sender(result.range.start) - result.range.start
        guard shift != 0 else { return result }
        return RecognitionResult(
            range: TimeRange(start: result.range.start + shift, end: result.range.end + shift),
            text: result.text,
            words: result.words.map { Word($0.text, range: TimeRange(start: $0.range.start + shift, end: $0.range.end + shift),
                                           confidence: $0.confidence) },
            alternatives: result.alternatives, written: result.written, language: result.language)
    }

    // MARK: - Sending

    private func pump() {
        guard let client, phase == .starting || phase == .streaming else { return }
        // No more in flight than the buffer keeps for a resume: a server that is behind stops
        // reading, and the sockets would otherwise take minutes of audio (2.7 MB of Opus was
        // seen) that a dropped connection would lose.
        while client.queuedBytes < Self.socketHighWater {
            guard let frame = buffer.withLock({ $0.maySend ? $0.takeUnsent() : nil }) else { break }
            if timeline == nil { timeline = SessionTimeline(startingAt: frame.start) }
            var gapSent = false
            let hole = timeline!.hole(before: frame)
            if hole > 0, session?.takesGaps == true {
                // The server takes gaps of up to an hour at a time.
                var left = hole
                while left > 0 {
                    client.send(.text(ClientMessages.gap(min(left, 3600))))
                    left -= 3600
                }
                log.info("declared a gap of \(Self.seconds(hole)) s of audio no longer held")
                gapSent = true
            }
            timeline!.sent(frame, gapSent: gapSent)
            if frame.isSilence {
                // Silence left out, declared instead (up to an hour a message, as gaps).
                log.debug("declared \(Self.seconds(frame.duration)) s of silence at \(Self.seconds(frame.start)) s")
                var left = frame.duration
                while left > SendBuffer.tolerance / 2 {
                    client.send(.text(ClientMessages.silence(min(left, 3600))))
                    left -= 3600
                }
            } else {
                client.send(.binary(frame.bytes))
            }
        }
        if inputOver && !buffer.withLock({ $0.hasUnsent }) {
            client.send(.text(ClientMessages.end))
            phase = .ending
        }
    }

    private func nextTimeout() -> Double? {
        if phase == .idle, let at = retryAt { return max(0, at - SystemClock.now()) }
        if let client, phase == .starting || phase == .streaming, client.queuedBytes >= Self.socketHighWater,
           buffer.withLock({ $0.hasUnsent }) {
            return 0.02  // the socket is full: look again soon
        }
        return 1
    }

    /// Lag and drops, on stderr, now and then.
    private func report() {
        let now = SystemClock.now()
        let (unsent, dropped) = buffer.withLock { ($0.unsentSeconds, $0.droppedSeconds) }
        if dropped - droppedReported >= 0.5 {
            log.warning("the buffer (--buffer-seconds \(Self.seconds(options.bufferSeconds))) is full: dropped \(Self.seconds(dropped - droppedReported)) s of the oldest audio")
            droppedReported = dropped
        }
        guard phase == .streaming, reportsLag else { return }
        if unsent > Self.lagReported, now - lastLagReport >= 5 {
            log.info("catching up: \(Self.seconds(unsent)) s of audio to send")
            lastLagReport = now
            laggingReported = true
        } else if laggingReported && unsent < 0.5 {
            log.info("caught up")
            laggingReported = false
        }
    }

    /// Audio waiting to be sent (seconds) past which the backlog is reported ("catching up").
    static let lagReported = 2.0

    /// A backlog the (re)connection's line announced counts as reported: "caught up" follows
    /// once it has drained, however fast (sent into the socket's buffers at once, it may never
    /// be seen by a periodic report), and "catching up" again only 5 s later.
    private func announcedBacklog(_ backlog: Double) {
        guard reportsLag, backlog > Self.lagReported else { return }
        lastLagReport = SystemClock.now()
        laggingReported = true
    }

    static func seconds(_ value: Double) -> String { JSONWriter.secondsText((value * 10).rounded() / 10) }
}
