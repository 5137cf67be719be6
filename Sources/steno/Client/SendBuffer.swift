/// One message of audio: an Opus packet or a piece of PCM, with where it lies on the
/// sender's timeline (seconds of captured audio since the sender started); or silence left
/// out (`isSilence`, no bytes), declared with a `silence` message of its duration.
struct AudioFrame: Sendable, Equatable {
    var start: Double
    var duration: Double
    var bytes: [UInt8]
    var isSilence = false
    var end: Double { start + duration }
    /// Seconds of audio it carries: silence costs nothing to hold or send.
    var audioSeconds: Double { isSilence ? 0 : duration }
}

/// The audio a sender holds: frames not sent yet, and frames sent but perhaps still needed
/// (the server may not have them, or a new session may have to hear them again).
///
/// Sent frames the server has acknowledged (`acknowledge`: its `progress.received`) are held
/// up to `limitSeconds` and then forgotten, oldest first; sent frames it has not acknowledged
/// are all kept, so that a resumed session gets again what was in flight when the connection
/// dropped (docs/protocol.md, "Resuming"), and the sender sends no more than `inFlightLimit` of
/// them (`maySend`). Unsent frames beyond `limitSeconds`: a source that can wait
/// (a file, a pipe) waits (`hasRoom` is false); a live one (a microphone) cannot, so the oldest
/// unsent audio is dropped and the hole is reported (`append` returns its length). Silence
/// frames keep their place on the timeline but count for nothing in these seconds (they hold
/// no audio and go at once); consecutive unsent ones are merged.
///
/// Pure: no clock, no I/O; times are the sender's.
struct SendBuffer: Sendable {
    let limitSeconds: Double
    /// Frames in time order; `frames[sentCount...]` are unsent.
    private(set) var frames: [AudioFrame] = []
    private var head = 0
    private var firstUnsent = 0
    /// Seconds of audio dropped so far (live sources only).
    private(set) var droppedSeconds = 0.0
    /// Seconds of audio not sent yet (silence frames count for nothing).
    private(set) var unsentSeconds = 0.0
    /// Seconds of audio sent and still held (likewise).
    private(set) var sentSeconds = 0.0
    /// Seconds of audio sent that the server has not acknowledged yet (in flight: in the
    /// sockets, or read by a server that has not said so).
    private(set) var unacknowledgedSeconds = 0.0
    /// `frames[ackIndex..<firstUnsent]` are sent and not acknowledged.
    private var ackIndex = 0

    /// Comparisons of times allow this much (the server writes times in milliseconds).
    static let tolerance = 0.002

    init(limitSeconds: Double) {
        self.limitSeconds = max(0.1, limitSeconds)
    }

    var hasUnsent: Bool { firstUnsent < frames.count }
    /// How much sent audio may be in flight (not acknowledged) before the sender waits: the
    /// buffer's limit, but at least what flows between two `progress` events (at most one a
    /// second) with room to spare, so that a small buffer does not stall a stream that keeps up.
    var inFlightLimit: Double { max(limitSeconds, 5) }
    /// Whether more may be sent now (`inFlightLimit`).
    var maySend: Bool { unacknowledgedSeconds < inFlightLimit - Self.tolerance }
    /// Whether a source that can wait may append now.
    var hasRoom: Bool { unsentSeconds < limitSeconds }
    /// Where the oldest frame held starts.
    var firstStart: Double? { head < frames.count ? frames[head].start : nil }
    /// Where the next frame to send starts.
    var nextUnsentStart: Double? { hasUnsent ? frames[firstUnsent].start : nil }
    /// Frames held, sent or not.
    var count: Int { frames.count - head }

    /// Adds a captured frame (after every other). For a live source over the limit, the
    /// oldest unsent frames are dropped: returns how many seconds were.
    @discardableResult
    mutating func append(_ frame: AudioFrame, live: Bool) -> Double {
        if frame.isSilence, let last = frames.last, last.isSilence, frames.count - 1 >= firstUnsent,
           abs(last.end - frame.start) <= Self.tolerance {
            frames[frames.count - 1].duration = frame.end - last.start
            return 0
        }
        frames.append(frame)
        unsentSeconds += frame.audioSeconds
        var dropped = 0.0
        if live {
            var excess = 0
            while unsentSeconds > limitSeconds + Self.tolerance, firstUnsent + excess < frames.count - 1 {
                let duration = frames[firstUnsent + excess].audioSeconds
                dropped += duration
                unsentSeconds -= duration
                excess += 1
            }
            if excess > 0 { frames.removeSubrange(firstUnsent..<(firstUnsent + excess)) }
            droppedSeconds += dropped
        }
        compact()
        return dropped
    }

    /// The next frame to send, now counted as sent.
    mutating func takeUnsent() -> AudioFrame? {
        guard hasUnsent else { return nil }
        let frame = frames[firstUnsent]
        firstUnsent += 1
        unsentSeconds -= frame.audioSeconds
        sentSeconds += frame.audioSeconds
        unacknowledgedSeconds += frame.audioSeconds
        if !hasUnsent { unsentSeconds = 0 }  // no drift from adding and taking away
        forgetBeyondLimit()
        return frame
    }

    /// Sent audio held beyond the limit is forgotten, oldest first, once the server has it.
    private mutating func forgetBeyondLimit() {
        while sentSeconds > limitSeconds + Self.tolerance, head < min(firstUnsent - 1, ackIndex) {
            sentSeconds -= frames[head].audioSeconds
            head += 1
        }
        if head == firstUnsent { sentSeconds = 0 }
        compact()
    }

    /// The server has the audio up to `time` (its `progress.received`, on the sender's
    /// timeline): what was sent before it is no longer in flight.
    mutating func acknowledge(through time: Double) {
        while ackIndex < firstUnsent, frames[ackIndex].end <= time + Self.tolerance {
            unacknowledgedSeconds -= frames[ackIndex].audioSeconds
            ackIndex += 1
        }
        if ackIndex == firstUnsent { unacknowledgedSeconds = 0 }
        forgetBeyondLimit()
    }

    /// Audio that ends by `time` is not needed any more (a new session would start after it).
    mutating func forget(through time: Double) {
        while head < firstUnsent, frames[head].end <= time + Self.tolerance {
            sentSeconds -= frames[head].audioSeconds
            // Heard, so received: no longer in flight either.
            if head >= ackIndex { unacknowledgedSeconds -= frames[head].audioSeconds }
            head += 1
        }
        ackIndex = max(ackIndex, head)
        if head == firstUnsent { sentSeconds = 0 }
        if ackIndex == firstUnsent { unacknowledgedSeconds = 0 }
        compact()
    }

    /// Makes everything held that ends after `time` unsent again (to send it to a resumed or
    /// new session). Returns where the first such frame starts, nil when nothing is held
    /// after `time`: a frame that starts later than `time` means the audio between is gone.
    @discardableResult
    mutating func rewind(after time: Double) -> Double? {
        forget(through: time)
        unsentSeconds += sentSeconds
        sentSeconds = 0
        firstUnsent = head
        ackIndex = head
        unacknowledgedSeconds = 0
        return firstStart
    }

    private mutating func compact() {
        guard head > 256, head * 2 > frames.count else { return }
        frames.removeFirst(head)
        firstUnsent -= head
        ackIndex -= head
        head = 0
    }
}

/// How one session's timeline (what the server reports) maps onto the sender's: the
/// session's 0 is where the first frame it was sent starts, and a hole in the audio sent
/// (audio dropped while the session ran) either moves the mapping on (`splice`) or, when the
/// server takes `gap` messages, advances the session's timeline too.
struct SessionTimeline: Sendable, Equatable {
    /// From `sessionStart` on, sender time = session time + `offset`.
    private(set) var segments: [(sessionStart: Double, offset: Double)]
    /// Session time just after the last audio sent.
    private(set) var sessionPosition = 0.0
    /// Sender time just after the last audio sent.
    private(set) var senderPosition: Double

    init(startingAt senderTime: Double) {
        segments = [(0, senderTime)]
        senderPosition = senderTime
    }

    static func == (a: SessionTimeline, b: SessionTimeline) -> Bool {
        a.sessionPosition == b.sessionPosition && a.senderPosition == b.senderPosition
            && a.segments.elementsEqual(b.segments) { $0.sessionStart == $1.sessionStart && $0.offset == $1.offset }
    }

    /// The sender time of session time `t`.
    func sender(_ t: Double) -> Double {
        let offset = segments.last { $0.sessionStart <= t + SendBuffer.tolerance }?.offset ?? segments[0].offset
        return t + offset
    }

    /// The hole before `frame`, in seconds (0 when it follows the last frame sent).
    func hole(before frame: AudioFrame) -> Double {
        let hole = frame.start - senderPosition
        return hole > SendBuffer.tolerance ? hole : 0
    }

    /// `frame` was sent. A hole before it is bridged: by a `gap` message the server was sent
    /// (`gapSent`), or else by moving the mapping on.
    mutating func sent(_ frame: AudioFrame, gapSent: Bool) {
        let hole = self.hole(before: frame)
        if hole > 0 {
            if gapSent {
                sessionPosition += hole
            } else {
                segments.append((sessionPosition, frame.start - sessionPosition))
            }
        }
        sessionPosition += frame.duration
        senderPosition = frame.end
    }

    /// The server has `received` seconds of this session (a resume): sending goes on from there.
    mutating func resumed(received: Double) {
        sessionPosition = received
        senderPosition = sender(received)
    }
}
