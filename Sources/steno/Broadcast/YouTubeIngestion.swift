import Foundation
import StenoCore

/// YouTube Live's HTTP caption ingestion, as a value: the captions waiting, the POST being
/// sent (kept whole, with its `seq`, until it is answered), and the clock offset the answers
/// give. The bridge around it (`YouTubeBridge`) does the I/O; this decides what is sent.
///
/// A POST goes to the stream's ingestion URL with `&seq=N` (1, 2, 3 … one more per POST,
/// the same on a retry) and a `text/plain` body of captions, each a line with the UTC time
/// its words were spoken on YouTube's clock (`YYYY-MM-DDTHH:MM:SS.mmm`), then its text with
/// `<br>` between lines. YouTube answers 200 with its own time, from which the offset of
/// this machine's clock is taken (half the round trip counted as the way back).
struct YouTubeIngestion: Sendable {
    struct Caption: Sendable, Equatable {
        /// When its first word was spoken, on this machine's clock (seconds since 1970).
        var spokenAt: Double
        var lines: [String]
    }

    /// One POST: its sequence number and body, sent until YouTube takes it.
    struct Post: Sendable, Equatable {
        var seq: Int
        var body: String
        /// How many times it was sent already.
        var attempts = 0
    }

    let url: String
    /// Largest number of captions in one POST.
    static let captionsPerPost = 20
    private(set) var waiting: [Caption] = []
    private(set) var inFlight: Post?
    private var lastSeq = 0
    /// YouTube's clock minus this machine's, in seconds, once an answer said.
    private(set) var clockOffset: Double?

    init(url: String) {
        self.url = url
    }

    mutating func add(_ caption: Caption) {
        waiting.append(caption)
    }

    /// The POST to send now: the one not yet answered, else a new one of the captions waiting.
    mutating func next() -> Post? {
        if let post = inFlight { return post }
        guard !waiting.isEmpty else { return nil }
        let batch = waiting.prefix(Self.captionsPerPost)
        waiting.removeFirst(batch.count)
        lastSeq += 1
        let post = Post(seq: lastSeq, body: batch.map(body).joined())
        inFlight = post
        return post
    }

    /// The URL of `post`: the ingestion URL with its `seq`.
    func address(of post: Post) -> String {
        url + (url.contains("?") ? "&" : "?") + "seq=\(post.seq)"
    }

    enum Outcome: Equatable {
        /// Taken; the next POST may go.
        case taken
        /// Not taken, worth sending again as it is (after a pause): no answer, 5xx, 429.
        case retry
        /// Refused for good (another 4xx): dropped, the next POST may go.
        case dropped(status: Int)
    }

    /// What came of sending `inFlight`: the HTTP status (nil: no answer), the answer's body,
    /// and this machine's clock when the request went and when the answer came.
    @discardableResult
    mutating func answered(status: Int?, body: String, sentAt: Double, answeredAt: Double) -> Outcome {
        guard var post = inFlight else { return .taken }
        switch status {
        case .some(200..<300):
            inFlight = nil
            if let theirs = Self.time(body.trimmingCharacters(in: .whitespacesAndNewlines)) {
                clockOffset = theirs - (sentAt + answeredAt) / 2
            }
            return .taken
        case .some(let code) where (400..<500).contains(code) && code != 408 && code != 429:
            inFlight = nil
            return .dropped(status: code)
        default:
            post.attempts += 1
            inFlight = post
            return .retry
        }
    }

    /// A caption's lines in the body: its time on YouTube's clock, then its text.
    private func body(_ caption: Caption) -> String {
        let text = caption.lines.map { $0.replacingOccurrences(of: "\n", with: " ") }.joined(separator: "<br>")
        return Self.timestamp(caption.spokenAt + (clockOffset ?? 0)) + "\n" + text + "\n"
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmm` (UTC, no zone letter) of seconds since 1970.
    static func timestamp(_ seconds: Double) -> String {
        String(UTCTime(secondsSince1970: seconds).iso8601.dropLast())
    }

    /// Seconds since 1970 of a `YYYY-MM-DDTHH:MM:SS.mmm` time (with or without a `Z`).
    static func time(_ text: String) -> Double? {
        let stamp = text.hasSuffix("Z") ? text : text + "Z"
        return UTCTime(iso8601: stamp).map { Double($0.millisecondsSince1970) / 1000 }
    }
}
