import StenoCore
import StenoSystem
import StenoTransport

/// `steno listen --obs ws://HOST:4455`: the channel's captions into OBS Studio, which puts
/// them into its stream as CEA-608 (obs-websocket 5's `SendStreamCaption`).
///
/// Each caption is one pop-on caption in OBS, shown until the next replaces it, so captions
/// are paced (`LiveCaptions`: each stays up as long as its words took to say) and cleared
/// after `clearAfter` seconds with nothing new; text is in 608's characters (OBS ends a row
/// at the first character it cannot show). OBS answers `OutputNotRunning` while it is not
/// streaming: captions are then dropped quietly (a line in the log when OBS stops and starts
/// streaming, which it also announces). When OBS is gone (closed, restarted) the bridge
/// reconnects, backing off to 10 s; a wrong or missing password ends `steno listen` (exit 3).
final class OBSBridge: CaptionBridge, @unchecked Sendable {
    enum Input: Sendable {
        case socket(attempt: Int, WebSocketClientEvent)
        case final(RecognitionResult)
        case volatile(String)
        case timeline
        case finish
        case stop
    }

    private let url: WebSocketURL
    private let password: String?
    private let log: Log
    private let failed: @Sendable (Int32, String) -> Void
    private let thread = BridgeThread<Input>()

    // The bridge thread's own.
    private var captions: LiveCaptions
    private var client: WebSocketClient?
    private var ending: [WebSocketClient] = []
    private var attempt = 0
    private var identified = false
    /// Whether OBS's stream output is active, as OBS last said.
    private var streaming: Bool?
    private var retryAt: Double?
    private var reconnection = Reconnection(maxDelay: 10, giveUpAfter: .infinity)
    private var lostSaid = false
    private var requests = 0
    private var stopping = false

    init(url: WebSocketURL, password: String?, liveWords: Bool, log: Log,
         failed: @escaping @Sendable (Int32, String) -> Void) {
        self.url = url
        self.password = password
        self.log = log
        self.failed = failed
        captions = LiveCaptions(paced: true, liveWords: liveWords, clearAfter: CaptionLayout().maxDuration, idleSettle: 0)
        thread.start(name: "steno-obs") { [self] in run() }
    }

    func timeline(startedAt: Double?) { thread.mailbox.post(.timeline) }
    func final(_ result: RecognitionResult) { thread.mailbox.post(.final(result)) }
    func volatile(_ text: String) { thread.mailbox.post(.volatile(text)) }
    func finish() { thread.mailbox.post(.finish) }

    func stop(timeout: Double) {
        thread.mailbox.post(.stop)
        thread.join(timeout: timeout)
    }

    // MARK: - The bridge thread

    private func run() {
        connect()
        while !stopping {
            let now = SystemClock.now()
            var wake = captions.nextDue
            if client == nil, let at = retryAt { wake = min(wake ?? at, at) }
            for input in thread.mailbox.take(timeout: wake.map { max(0, $0 - now) }) {
                handle(input)
            }
            if stopping { break }
            if client == nil, let at = retryAt, SystemClock.now() >= at { connect() }
            show(captions.due(now: SystemClock.now()))
        }
        client?.close(code: 1000)
        _ = client?.waitUntilFinished(timeout: 2)
        client?.disconnect()
        for old in ending { _ = old.waitUntilFinished(timeout: 2) }
    }

    private func handle(_ input: Input) {
        let now = SystemClock.now()
        switch input {
        case .final(let result): captions.final(result, now: now)
        case .volatile(let text): captions.volatile(text, now: now)
        case .timeline: captions.restart()
        case .finish: captions.finish(now: now)
        case .stop: stopping = true
        case .socket(let number, let event):
            guard number == attempt else { return }
            socket(event)
        }
    }

    private func connect() {
        retryAt = nil
        attempt += 1
        identified = false
        streaming = nil
        var configuration = WebSocketClientConfiguration(url: url)
        configuration.keepAliveSeconds = 10
        configuration.log = log
        let client = WebSocketClient(configuration: configuration)
        let mailbox = thread.mailbox
        let number = attempt
        do {
            try client.connect { event in mailbox.post(.socket(attempt: number, event)) }
        } catch {
            mailbox.post(.socket(attempt: number, .failed("\(error)")))
        }
        self.client = client
    }

    private func socket(_ event: WebSocketClientEvent) {
        switch event {
        case .opened:
            log.debug("connected to OBS at \(url.hostHeader)")
        case .message(.text(let text)):
            guard let message = OBSWebSocket.message(text) else { return }
            received(message)
        case .message(.binary):
            break
        case .closed(let code, let reason, _) where code == OBSWebSocket.authenticationFailed:
            give(up: password == nil ? "OBS asks for a password: give --obs-password (or STENO_OBS_PASSWORD)"
                                     : "OBS refused the password (--obs-password): \(reason)")
        case .closed(let code, let reason, _) where code == OBSWebSocket.unsupportedRPCVersion:
            give(up: "OBS does not speak obs-websocket 5 (RPC version 1): \(reason)")
        case .closed(let code, let reason, _):
            lost("OBS closed the connection (\(code.map(String.init) ?? "no close code")\(reason.isEmpty ? "" : ": " + reason))")
        case .refused(let status, _):
            lost("OBS refused the WebSocket (HTTP \(status))")
        case .failed(let why):
            lost("cannot reach OBS at \(url.hostHeader): \(why)")
        }
    }

    private func received(_ message: OBSWebSocket.Message) {
        switch message {
        case .hello(let challenge, let salt):
            if challenge != nil, password == nil {
                give(up: "OBS asks for a password: give --obs-password (or STENO_OBS_PASSWORD)")
                return
            }
            _ = client?.send(.text(OBSWebSocket.identify(password: password, challenge: challenge, salt: salt)))
        case .identified:
            identified = true
            reconnection.succeeded()
            log.info(lostSaid ? "connected to OBS again" : "connected to OBS at \(url.hostHeader)")
            lostSaid = false
            request("GetStreamStatus")
        case .response(_, let code, _, let data):
            if case .bool(let active)? = data?["outputActive"] { streamingIs(active) }
            if code == OBSWebSocket.outputNotRunning { streamingIs(false) }
            if code != OBSWebSocket.success && code != OBSWebSocket.outputNotRunning {
                log.warning("OBS answered a caption with status \(code)")
            }
        case .event(let type, let data):
            if type == "StreamStateChanged", case .bool(let active)? = data?["outputActive"] { streamingIs(active) }
        }
    }

    private func streamingIs(_ active: Bool) {
        guard streaming != active else { return }
        streaming = active
        log.info(active ? "OBS is streaming: captions go into its stream"
                        : "OBS is not streaming: captions wait for it (OBS puts them only into its stream)")
    }

    /// The captions due now go to OBS when it streams, else they are dropped.
    private func show(_ due: [LiveCaptions.Caption]) {
        guard let last = due.last, identified, streaming != false else { return }
        // Paced captions come one at a time; should several be due, the last is the one to see.
        request("SendStreamCaption", captionText: last.text)
    }

    private func request(_ type: String, captionText: String? = nil) {
        requests += 1
        _ = client?.send(.text(OBSWebSocket.request(type, id: "steno-\(requests)", captionText: captionText)))
    }

    private func lost(_ why: String) {
        if let client { ending.append(client) }
        client = nil
        identified = false
        ending.removeAll { $0.waitUntilFinished(timeout: 0) }
        let delay = reconnection.failed(at: SystemClock.now(), jitter: Double.random(in: 0...1)) ?? 10
        if lostSaid {
            log.debug("\(why); trying again in \(Sender.seconds(delay)) s")
        } else {
            log.warning("\(why); trying again (every \(Sender.seconds(reconnection.maxDelay)) s at most)")
            lostSaid = true
        }
        retryAt = SystemClock.now() + delay
    }

    private func give(up why: String) {
        stopping = true
        failed(ExitCode.refused, why)
    }
}
