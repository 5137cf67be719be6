import StenoCore
import StenoSystem

/// `steno listen --youtube-url URL`: the channel's captions posted to YouTube Live's caption
/// ingestion (`YouTubeIngestion` says what is posted): each cue as the finals settle it, timed
/// by when its words were spoken (the channel's `startedAt` plus the audio time), corrected
/// by the clock offset YouTube's answers give. A POST that gets no answer, a 5xx or 429 is
/// sent again as it was (same `seq`, same body) after 1 s, 2 s, 4 s … up to 30 s, captions
/// that come meanwhile wait for the next POST; one refused (another 4xx) is dropped with a
/// warning. A refusal of the ingestion URL itself (403, 404 on the first POST) ends
/// `steno listen` (exit 3).
final class YouTubeBridge: CaptionBridge, @unchecked Sendable {
    enum Input: Sendable {
        case final(RecognitionResult)
        case timeline(startedAt: Double?)
        case finish
        case stop(deadline: Double)
    }

    private let log: Log
    private let failed: @Sendable (Int32, String) -> Void
    private let thread = BridgeThread<Input>()
    private let caFile: String?

    // The bridge thread's own.
    private var ingestion: YouTubeIngestion
    private var captions = LiveCaptions(paced: false, in608: false)
    private var startedAt: Double?
    private var retryAt: Double?
    private var failures = 0
    private var taken = 0
    private var stopAt: Double?

    init(url: String, caFile: String? = nil, log: Log, failed: @escaping @Sendable (Int32, String) -> Void) {
        ingestion = YouTubeIngestion(url: url)
        self.caFile = caFile
        self.log = log
        self.failed = failed
        thread.start(name: "steno-youtube") { [self] in run() }
    }

    func timeline(startedAt: Double?) { thread.mailbox.post(.timeline(startedAt: startedAt)) }
    func final(_ result: RecognitionResult) { thread.mailbox.post(.final(result)) }
    func volatile(_ text: String) {}
    func finish() { thread.mailbox.post(.finish) }

    func stop(timeout: Double) {
        thread.mailbox.post(.stop(deadline: SystemClock.now() + timeout))
        thread.join(timeout: timeout + 1)
    }

    /// This machine's clock, in seconds since 1970.
    static func wallSeconds() -> Double { Double(SystemClock.wall().millisecondsSince1970) / 1000 }

    // MARK: - The bridge thread

    private func run() {
        while true {
            let now = SystemClock.now()
            var wake = captions.nextDue
            if let at = retryAt { wake = min(wake ?? at, at) }
            if let at = stopAt { wake = min(wake ?? at, at) }
            for input in thread.mailbox.take(timeout: wake.map { max(0, $0 - now) }) { handle(input) }
            takeDue(at: SystemClock.now())
            if retryAt.map({ SystemClock.now() >= $0 }) ?? true { post() }
            if let at = stopAt, (ingestion.inFlight == nil && ingestion.waiting.isEmpty) || SystemClock.now() >= at { break }
        }
        if ingestion.inFlight != nil || !ingestion.waiting.isEmpty {
            log.warning("YouTube: \(ingestion.waiting.count + (ingestion.inFlight == nil ? 0 : 1)) captions were not delivered")
        }
    }

    private func handle(_ input: Input) {
        let now = SystemClock.now()
        switch input {
        case .final(let result): captions.final(result, now: now)
        case .timeline(let at):
            captions.restart()
            startedAt = at
        case .finish: captions.finish(now: now)
        case .stop(let deadline):
            captions.finish(now: now)
            takeDue(at: now + captions.idleSettle)
            stopAt = deadline
        }
    }

    /// The cues due by `time`, waiting for a POST, timed on the wall clock when they were said.
    private func takeDue(at time: Double) {
        for caption in captions.due(now: time) where !caption.lines.isEmpty {
            let wall = (startedAt ?? Self.wallSeconds()) + (caption.spokenAt ?? 0)
            ingestion.add(YouTubeIngestion.Caption(spokenAt: wall, lines: caption.lines))
        }
    }

    /// Sends POSTs until none is left or one must wait.
    private func post() {
        retryAt = nil
        while let post = ingestion.next() {
            let sentAt = Self.wallSeconds()
            let answer = HTTPRequest.post(ingestion.address(of: post), body: post.body, caFile: caFile)
            let status: Int?
            let body: String
            switch answer {
            case .success(let a): (status, body) = (a.status, a.body)
            case .failure(let f): (status, body) = (nil, f.message)
            }
            switch ingestion.answered(status: status, body: body, sentAt: sentAt, answeredAt: Self.wallSeconds()) {
            case .taken:
                if failures > 0 { log.info("YouTube takes captions again") }
                failures = 0
                taken += 1
            case .dropped(let code):
                if taken == 0 && (code == 403 || code == 404) {
                    failed(ExitCode.refused, "YouTube refused the caption ingestion URL (HTTP \(code)): check --youtube-url")
                    stopAt = 0
                    return
                }
                log.warning("YouTube refused captions (HTTP \(code)): \(body.prefix(120)); they are dropped")
            case .retry:
                let delay = min(30, Double(1 << min(failures, 5)))
                failures += 1
                let why = status.map { "HTTP \($0)" } ?? body
                if failures == 1 { log.warning("YouTube did not take captions (\(why)); sending them again, backing off to 30 s") }
                else { log.debug("YouTube did not take captions (\(why)); again in \(Sender.seconds(delay)) s") }
                retryAt = SystemClock.now() + delay
                return
            }
        }
    }
}
