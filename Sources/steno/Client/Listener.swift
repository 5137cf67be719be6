import StenoCore
import StenoSystem
import StenoTransport

/// Which of a channel's finals were printed. A viewer gets `joined` and the channel's finals
/// so far on every connection; a final is printed once per publisher timeline (a `joined`
/// with another `startedAt` is a new publisher, whose times start again at 0), by its end.
struct ChannelFollower: Sendable, Equatable {
    /// The `startedAt` of the timeline being followed.
    private(set) var timeline: String?
    /// The end of the last final printed, per timeline.
    private var printedThrough: [String: Double] = [:]

    /// A `joined`: whether it starts another timeline than the one followed.
    mutating func joined(startedAt: String) -> Bool {
        defer { timeline = startedAt }
        return timeline != startedAt
    }

    /// Whether a final is new (and is now counted as printed).
    mutating func isNew(_ range: TimeRange) -> Bool {
        let key = timeline ?? ""
        if let through = printedThrough[key], range.end <= through + SendBuffer.tolerance { return false }
        printedThrough[key] = range.end
        return true
    }
}

/// `steno listen`: a channel's captions, across reconnects.
final class Listener {
    private let options: ListenOptions
    private let inbox: Inbox
    private let status: StatusLine
    private let log: Log
    private let writer: CaptionWriter
    private let connector: Connector
    private var reconnection: Reconnection
    private var follower = ChannelFollower()
    private var connection = ConnectionSlot()
    private var client: WebSocketClient? { connection.client }
    private var retryAt: Double?
    private var joinedOnce = false
    private var exitCode: Int32?
    /// OBS and YouTube, when asked for.
    private var bridges: [any CaptionBridge] = []

    init(options: ListenOptions, log: Log, status: StatusLine, inbox: Inbox) {
        self.options = options
        self.inbox = inbox
        self.status = status
        self.log = log
        writer = CaptionWriter(format: options.client.format) { text in status.around { StandardStreams.stdout(text) } }
        connector = Connector(options: options.client, route: "/v1/listen?channel=\(options.channel)" + (options.language.map { "&language=\($0)" } ?? ""), inbox: inbox, log: log)
        reconnection = options.client.reconnection
        let failed: @Sendable (Int32, String) -> Void = { code, message in inbox.post(.bridgeFailed(code: code, message: message)) }
        if let url = options.obs {
            bridges.append(OBSBridge(url: url, password: options.obsPassword, liveWords: options.liveWords, log: log, failed: failed))
        }
        if let url = options.youtubeURL {
            bridges.append(YouTubeBridge(url: url, caFile: options.client.caFile, log: log, failed: failed))
        }
    }

    func run() -> Int32 {
        connect()
        while exitCode == nil {
            var timeout: Double? = nil
            if client == nil, let at = retryAt { timeout = max(0, at - SystemClock.now()) }
            for input in inbox.take(timeout: timeout) {
                handle(input)
                if exitCode != nil { break }
            }
            if exitCode == nil, client == nil, let at = retryAt, SystemClock.now() >= at { connect() }
        }
        writer.finish()
        status.show("")
        for bridge in bridges {
            bridge.finish()
            bridge.stop(timeout: 5)
        }
        connection.finish()
        return exitCode ?? ExitCode.done
    }

    private func connect() {
        retryAt = nil
        connection.open(connector)
    }

    private func handle(_ input: ClientInput) {
        switch input {
        case .socket(let attempt, let event):
            guard attempt == connection.attempt else { return }
            switch event {
            case .opened:
                log.debug("connected to \(options.client.url("/v1/listen"))")
            case .message(.text(let text)):
                if let message = ServerMessage(text) { received(message) }
            case .message(.binary):
                break
            case .closed, .refused, .failed:
                ended(event)
            }
        case .interrupt(let count):
            if count >= 2 {
                exitCode = ExitCode.interrupted
                return
            }
            // Nothing to wait for: a viewer only reads.
            client?.close(code: 1000)
            _ = client?.waitUntilFinished(timeout: 2)
            exitCode = ExitCode.done
        case .audio, .inputEnded:
            break
        case .bridgeFailed(let code, let message):
            log.error(message)
            exitCode = code
        }
    }

    private func received(_ message: ServerMessage) {
        switch message.type {
        case "joined":
            let startedAt = message.string("startedAt") ?? ""
            reconnection.succeeded()
            if follower.joined(startedAt: startedAt) {
                let wall = UTCTime(iso8601: startedAt).map { Double($0.millisecondsSince1970) / 1000 }
                for bridge in bridges { bridge.timeline(startedAt: wall) }
                writer.event(message)
                log.info(joinedOnce ? "channel \(options.channel): a new timeline (started \(startedAt))"
                                    : "following channel \(options.channel) (started \(startedAt))")
            } else {
                log.info("following channel \(options.channel) again")
            }
            joinedOnce = true
        case "final":
            guard let result = message.result, follower.isNew(result.range) else { return }
            writer.event(message)
            writer.final(result)
            for bridge in bridges { bridge.final(result) }
            status.show("")
        case "volatile":
            writer.event(message)
            status.show(message.string("text") ?? "")
            for bridge in bridges { bridge.volatile(message.string("text") ?? "") }
        case "publisher":
            writer.event(message)
            let state = message.string("state") ?? ""
            if state == "ended" || state == "lost" {
                // No final of this broadcast follows: its last cue is written now.
                writer.finish()
                for bridge in bridges { bridge.finish() }
                status.show("")
            }
            log.info("channel \(options.channel): the broadcast is \(state)")
        case "error":
            writer.event(message)
            if let error = message.error {
                log.warning("the server says: \(error.code): \(error.message)")
            }
        default:
            writer.event(message)
        }
    }

    private func ended(_ event: WebSocketClientEvent) {
        connection.retire()
        status.show("")
        switch reconnection.verdict(for: event, at: SystemClock.now(), jitter: Double.random(in: 0...1)) {
        case .retry(let delay, let why):
            log.warning("\(why); reconnecting in \(Sender.seconds(delay)) s")
            retryAt = SystemClock.now() + delay
        case .stop(let code, let message):
            log.error(message)
            exitCode = code
        }
    }
}
